"""What a user types and sees: the command line (a recipe, then flags; --help in sections; each mistake in one
line), the progress lines with their heartbeat, and how a run ended. delta.py and eval.py read their arguments
here; this file imports nothing of delta.py (the argument classes are handed to it).

    parse_args(argv, cls, ...)    a recipe, then flags, into the dataclass `cls`; UsageError: a mistake, in one line
    progress(args, rank)          the run's one progress helper: report(what, total, unit, bound) -> tick
    summary(args, step, seconds)  a finished run in one line
    EXIT, ENDINGS                 the exit statuses, and --help's words for them
"""
import argparse
import dataclasses
import difflib
import json
import os
import re
import sys
import threading
import time

from tqdm import tqdm
from transformers import HfArgumentParser


class UsageError(ValueError):
    """A mistake in the command line or in a recipe, said in one line."""


PEER_NAMES = {"--learning_rate": "--lr", "--num_generations": "--group_size", "--max_completion_length":
              "--max_new_tokens", "--model_name_or_path": "--model", "--num_train_epochs": "--epochs",
              "--max_prompt_len": "--max_prompt_length"}  # TRL's and verl's names of delta.py's flags
EXIT = {"mistake": 2, "signal": 128}  # exit status: 0 finished (or already), 2 a mistake in the input, 128 + N a signal
ENDINGS = """exit status: 0 finished, or finished already; 2 a mistake in the input, said in one line;
  128 + N stopped by signal N (143: SIGTERM, 130: Ctrl-C): the same command with --resume continues."""


def parse_args(argv, cls, prog, about=None, groups=None, epilog=None):
    """The dataclass `cls` from command-line flags, after an optional .json / .yaml file of them (a recipe) that
    they override: `delta.py recipes/qwen3-8b-deepmath.yaml --output_dir runs/x`. Every mistake is a UsageError of
    one line. about, groups ({title: "name name ..."}), epilog: --help's text before, sections, and text after."""
    argv = list(argv)
    parser = help_parser(cls, prog, about, groups, epilog)
    if argv and argv[0].endswith((".json", ".yaml", ".yml")):
        parser.set_defaults(**read_recipe(argv[0], cls, prog))  # a string is parsed as a flag's value would be
        argv = argv[1:]
    args, rest = parser.parse_args_into_dataclasses(argv, return_remaining_strings=True)
    if rest:  # one line naming it, not HfArgumentParser's traceback
        first = rest[0]
        if first.endswith((".json", ".yaml", ".yml")):
            raise UsageError(f"{first}: a recipe comes first, before any flag (python {prog} {first} --flag ...)")
        names, flag = [f"--{f.name}" for f in dataclasses.fields(cls)], first.split("=")[0]
        near = difflib.get_close_matches(flag, names + list(PEER_NAMES), n=1, cutoff=0.6)
        near = [PEER_NAMES.get(n, n) for n in near]  # --lerning_rate: TRL's --learning_rate, which is --lr here
        raise UsageError(f"{first}: no such argument{f' (did you mean {near[0]}?)' if near else ''}; "
                         f"python {prog} --help lists them")
    return args


def read_recipe(path, cls, prog):
    """A recipe's {argument: value}, or a UsageError naming the file and what is wrong with it."""
    import yaml  # transformers' own dependency

    if not os.path.isfile(path):
        raise UsageError(f"{path}: no such recipe file (recipes/ holds the project's)")
    try:
        with open(path) as f:
            values = json.load(f) if path.endswith(".json") else yaml.safe_load(f) or {}
    except (ValueError, yaml.YAMLError) as e:  # json's errors are ValueErrors
        where = getattr(e, "problem_mark", None)
        what = f"{e.problem}, line {where.line + 1}" if where else " ".join(str(e).split())
        raise UsageError(f"{path}: not valid {'JSON' if path.endswith('.json') else 'YAML'}: {what}") from None
    if not isinstance(values, dict):
        raise UsageError(f"{path}: a recipe maps argument names to values, not a {type(values).__name__}")
    unknown = sorted(set(values) - {f.name for f in dataclasses.fields(cls)})
    if unknown:
        raise UsageError(f"{path}: no such arguments: {', '.join(unknown)} (python {prog} --help)")
    return values


def help_parser(cls, prog, about=None, groups=None, epilog=None):
    """HfArgumentParser for `cls`, its mistakes raised as UsageError, its --help in `groups` after `about`; each
    --no_X says what it turns off."""
    class Format(argparse.RawDescriptionHelpFormatter):  # one line an option, its default where it has one
        def __init__(self, prog):
            super().__init__(prog, max_help_position=36, width=120)

        def _get_help_string(self, action):
            shown = action.default not in ("", None, argparse.SUPPRESS) and action.option_strings != ["-h", "--help"]
            return action.help + (f" (default: {action.default})" if shown else "")
    parser = HfArgumentParser(cls, prog=prog, usage=f"python {prog} [RECIPE] [--flag VALUE ...]",
                              description=about, epilog=epilog, formatter_class=Format)

    def error(message):  # "argument --lr: invalid float value: 'abc'" -> "--lr abc: not a float"
        bad = re.match(r"argument (\S+?)(?:/\S+)?: invalid (\w+) value: '(.*)'$", message)
        raise UsageError(f"{bad[1]} {bad[3]}: not a {bad[2]}" if bad else message.replace("argument ", "", 1))
    parser.error = error
    for action in parser._actions:  # shown as written: --run_name (--run-name works too), a short value's name
        action.option_strings = [o for o in action.option_strings if "-" not in o[2:]]
        action.metavar = {int: "N", float: "X"}.get(action.type, "TEXT") if action.nargs is None else "BOOL"
        if action.option_strings and action.option_strings[0].startswith("--no_"):
            action.help, action.default = f"turn --{action.dest} off", argparse.SUPPRESS
    if groups:
        order = [name for names in groups.values() for name in names.split()]
        where = {name: title for title, names in groups.items() for name in names.split()}
        sections = {title: parser.add_argument_group(title) for title in groups}
        moved = sorted((a for a in parser._optionals._group_actions if a.dest in where),
                       key=lambda a: (order.index(a.dest), a.option_strings[0].startswith("--no_")))
        for action in moved:
            parser._optionals._group_actions.remove(action)
            sections[where[action.dest]]._group_actions.append(action)
    return parser


def progress(args, rank):
    """The run's one progress helper (run.report), which it hands to its sampler and its phases:
    report(what, total=None, unit="", bound=False) -> tick(k=1, tokens=0, note=""). A phase that counts its `total`
    units (rows, decode steps) gets, on rank 0 with --progress, a line at most every --progress_seconds: done, the
    rate (tokens/s when counted) and the time left at that rate (`bound`: at most that, a phase that may end early).
    A phase with no count (total None: a model read, vLLM's start) gets a line now and its time at tick(). Whatever
    one unit takes, a heartbeat (a timer thread) adds a line once --progress_seconds pass without one, until the
    phase has counted its total, ends, or the next begins; report(None) ends it. The other ranks: nothing."""
    every, lock, live = args.progress_seconds, threading.Lock(), {"phase": None, "beating": False}

    def line(p, now):  # a phase's status at `now`
        s, (n, tokens) = now - p["start"], p["done"]
        if p["total"] is None:
            return f"  {p['what']}: running for {duration(s)}"
        rate = f"{tokens / s:,.0f} tokens/s" if tokens else f"{n / s:.2f} {p['unit']}/s"
        left = f", {'at most' if p['bound'] else 'about'} {duration(s * (p['total'] - n) / n)} left" if n else ""
        note = f", {p['note']}" if p["note"] else ""
        return f"  {p['what']}: {n:,} of {p['total']:,} {p['unit']} in {duration(s)}, {rate}{left}{note}"

    def heartbeat():  # runs while a phase does
        while True:
            time.sleep(min(1.0, every / 4))
            with lock:
                p, now = live["phase"], time.perf_counter()
                if p is None or p["total"] is not None and p["done"][0] >= p["total"]:
                    live["beating"] = False
                    return
                if now - p["last"] >= every:
                    p["last"] = now
                    tqdm.write(line(p, now), file=sys.stderr)

    def report(what, total=None, unit="", bound=False):
        if rank != 0 or not args.progress or total == 0 or what is None:
            live["phase"] = None
            return lambda k=1, tokens=0, note="": None
        p = dict(what=what, total=total, unit=unit, bound=bound, start=time.perf_counter(), done=[0, 0], note="")
        p["last"] = p["start"]
        with lock:
            live["phase"] = p
            if every > 0 and not live["beating"]:
                live["beating"] = True
                threading.Thread(target=heartbeat, daemon=True).start()
        if total is None:
            print(f"{what} ...", file=sys.stderr, flush=True)

            def finished(k=1, tokens=0, note=""):
                live["phase"] = None if live["phase"] is p else live["phase"]
                print(f"{what}: done in {duration(time.perf_counter() - p['start'])}", file=sys.stderr, flush=True)
            return finished

        def tick(k=1, tokens=0, note=""):
            with lock:
                p["done"][0] += k
                p["done"][1] += tokens
                p["note"] = note or p["note"]
                now = time.perf_counter()
                if now - p["last"] >= every and 0 < p["done"][0] < total:
                    p["last"] = now
                    tqdm.write(line(p, now), file=sys.stderr)
        return tick
    return report


def duration(seconds):
    """12 s, 4 min 05 s, 2 h 03 min."""
    s = int(round(seconds))
    return (f"{s} s" if s < 60 else f"{s // 60} min {s % 60:02d} s" if s < 3600 else
            f"{s // 3600} h {s % 3600 // 60:02d} min")


def summary(args, step, seconds):
    """A finished run in one line: its steps, held-out accuracy first and last, wall time, where its files are."""
    final, log = os.path.join(args.output_dir, "final"), os.path.join(args.output_dir, "metrics.jsonl")
    if args.warm_start_only:
        return f"finished the warm start in {duration(seconds)}: the model is in {final}"
    rows = [json.loads(line) for line in open(log)] if os.path.exists(log) else []
    acc = [(r["step"], r["eval/accuracy"]) for r in rows if "eval/accuracy" in r]
    said = f"; held-out accuracy {100 * acc[0][1]:.1f} % at step {acc[0][0]}, {100 * acc[-1][1]:.1f} % at step " \
           f"{acc[-1][0]}" if acc else ""
    return (f"finished: {step} steps in {duration(seconds)} (this process){said}; the model is in {final}, the "
            f"metrics in {log}")
