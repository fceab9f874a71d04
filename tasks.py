"""What a run trains and evaluates on: the embedded tasks of the offline default, and every dataset reader.

The offline default: a character tokenizer, a Qwen3 of about 0.5 M parameters, and the embedded tasks
(delta.py --task addition, multistep, filler, code). Each task builds (training rows, held-out rows) of
{"question", "answer", "solution"}; the solutions warm-start the tiny model (warm_start, below) until RL can learn.
load_task(args) -> (kind, training rows, held-out rows)   the embedded task, or a dataset (load_rows)
Datasets, rows as people store them -> the rows and test specs that rewards.py grades:
    code_specs(rows, schema) -> list[dict]        every row's spec, checked first; CODE_SCHEMAS lists the layouts
    code_rows(rows, schema) -> [(prompt, spec)]   the same with each row's prompt in code_prompt's convention
    dataset_rows(rows, prompt_key, answer_key) -> (kind, rows)   any dataset's rows, math or code, read once
    gold_answer(value, i, key) -> str | list      an answer column's value by its dataset's convention (GSM8K's
                                                  `####`, a final box, a list of acceptable answers: any-of)
    read_table(path, config, split) -> list[dict]   a local .jsonl/.json/.parquet/.csv file or a hub dataset
    spec_deepcoder, spec_primeintellect, spec_apps, spec_livecodebench, spec_jsonl   one reader per layout
    code_prompt(question, starter_code, fn_name) -> str   LiveCodeBench's prompt convention
    get_field(row, "reward_model.ground_truth")   a nested column by a dotted key
    lcb_private_tests, pickled_str                LiveCodeBench's encoded tests, read without unpickling
    lcb_in_window, lcb_release_files              LiveCodeBench's date window and release files
    DataError, CodeSpecError                      a row that cannot be read, or whose tests cannot be graded
Nothing here imports delta.py (warm_start is handed its functions); this file imports rewards.py, never the reverse.
"""
import base64
import contextlib
import datetime
import itertools
import json
import os
import random
import re
import sys
import zlib

import torch
import transformers
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

import sampling
from rewards import _HASHES, DataError, _boxes, _check_spec, final_answers

TINY_CHARS = "0123456789+-*/=?.,:;!()[]{}\\$^_ abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ\n'\"<>|&%#@~`"


def tiny_tokenizer():
    """The offline default's tokenizer: one token per character, pad = eos (as in Qwen), a short chat template."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    vocab = {t: i for i, t in enumerate(dict.fromkeys(["<|endoftext|>", "<unk>", *TINY_CHARS]))}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")  # one token per character
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|endoftext|>", pad_token="<|endoftext|>",
                                  unk_token="<unk>", padding_side="left")
    tok.chat_template = ("{% for m in messages %}{{ 'Q: ' + m['content'] + '\\n' }}{% endfor %}"
                         "{% if add_generation_prompt %}A: {% endif %}")  # short prompts keep the default fast
    return tok


def build_tiny(path, seed=0, model_type="qwen3", **config):
    """The offline default: a character tokenizer and a Qwen3 of about 0.5 M parameters, saved to `path`; `config`
    changes its config (the benches' larger models: other sizes, a vocabulary beyond the characters'), `model_type`
    its family (the tests' other backbones: llama, olmo3, gemma3_text, qwen3_moe, ...)."""
    tok = tiny_tokenizer()
    tiny = dict(vocab_size=len(tok), hidden_size=128, num_hidden_layers=2, intermediate_size=512,
                num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=256,
                eos_token_id=0, pad_token_id=0, bos_token_id=None, tie_word_embeddings=False)
    cfg = transformers.AutoConfig.for_model(model_type, **dict(tiny, **config))
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(cfg)
    tok.save_pretrained(path)
    model.save_pretrained(path)


def addition_task(seed=0, n_eval=256):
    """Two-digit addition. Every response shares the boilerplate; only the boxed digits decide the reward."""
    pairs = [(a, b) for a in range(10, 100) for b in range(10, 100)]
    random.Random(seed).shuffle(pairs)
    rows = [{"question": f"{a}+{b}=?", "answer": str(a + b),
             "solution": f"Let us add the two numbers. \\boxed{{{a + b}}}"} for a, b in pairs]
    return rows[n_eval:], rows[:n_eval]


def chain_task(lengths, filler=0):
    """Chains of single digits added step by step, `3+5=8, 8+8=16, 16+2=18. \\boxed{18}`: one wrong step result makes
    the answer wrong. `filler` random three-letter words after each step (`3+5=8 qzt mow, ...`) add shared,
    high-entropy tokens that the reward ignores."""
    def build(seed=0, n_eval=256):
        rng, rows = random.Random(seed), []
        for xs in (xs for k in lengths for xs in itertools.product(range(1, 10), repeat=k)):
            steps, total = [], xs[0]
            for x in xs[1:]:
                words = "".join(" " + "".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=3)) for _ in range(filler))
                steps.append(f"{total}+{x}={total + x}{words}")
                total += x
            rows.append({"question": "+".join(map(str, xs)) + "=?", "answer": str(total),
                         "solution": ", ".join(steps) + f". \\boxed{{{total}}}"})
        random.Random(seed).shuffle(rows)
        return rows[n_eval:], rows[:n_eval]
    return build


def code_task(seed=0, n_eval=256):
    """Code: write f from three of its values, `f(0)=4, f(1)=7, f(2)=10` -> a fenced `def f(x): return x*3+4`, for
    f(x) = a x + b (a in 1..30, b in 0..30). The reward runs the program in the sandbox (rewards.py, call mode) on
    x = 0, 1, 2 and two points the prompt does not show; any program that computes f passes."""
    rows = []
    for a in range(1, 31):
        for b in range(0, 31):
            xs = [0, 1, 2, 7, 12]
            rows.append({"question": f"f(0)={b}, f(1)={a + b}, f(2)={2 * a + b}. f?",
                         "answer": {"fn_name": "f", "inputs": [[x] for x in xs], "outputs": [a * x + b for x in xs]},
                         "solution": f"```\ndef f(x): return x*{a}+{b}\n```"})
    random.Random(seed).shuffle(rows)
    return rows[n_eval:], rows[:n_eval]


TASKS = {  # sft_target: the accuracy of temperature-1 samples at which the warm start stops and RL begins
    "addition": dict(build=addition_task, sft_target=0.12),
    "multistep": dict(build=chain_task((2, 3, 4, 5)), sft_target=0.2),  # 66,420 problems
    "filler": dict(build=chain_task((3, 4, 5), filler=2), sft_target=0.2),  # 66,339 problems, about 75 tokens
    "code": dict(build=code_task, sft_target=0.15, sft_check=64),  # 930 functions; the sandbox in the reward
}


def warm_start(run, log, trainer):
    """Supervised warm start of the tiny default until sft_target_acc of its samples are right (RL needs some).
    trainer: delta.py as a module (its evaluate, prompt and forward functions), passed in: nothing here imports it."""
    a, tok, t = run.args, run.tok, trainer
    opt = torch.optim.AdamW(run.model.parameters(), lr=a.sft_lr, weight_decay=0.0)
    gen, per_rank = torch.Generator().manual_seed(a.seed + 1), a.sft_batch_size // run.world
    check = TASKS[a.task].get("sft_check")  # held-out problems the stopping rule samples (code: sandbox cost)
    acc, step = t.evaluate(run, -1, a.temperature, limit=check), 0
    tick = run.report("warm start", a.sft_max_steps, "steps", bound=True)  # ends at the target
    while acc < a.sft_target_acc and step < a.sft_max_steps:
        if t.stopped(run):  # SIGINT or SIGTERM: train() says so and ends; nothing is saved before RL's first step
            run.warm_state = (f"step {step} of at most {a.sft_max_steps}, sample accuracy {acc:.2f} of the target "
                              f"{a.sft_target_acc:.2f}")
            return
        idx = torch.randint(len(run.train_rows), (a.sft_batch_size,), generator=gen)
        rows = [run.train_rows[i] for i in idx[run.rank * per_rank:(run.rank + 1) * per_rank]]
        prompts = [sampling.encode_prompt(tok, t.prompt_text(tok, r["question"], a.instruction)) for r in rows]
        solutions = [tok(r["solution"], add_special_tokens=False).input_ids + [tok.eos_token_id] for r in rows]
        batch = sampling.rollout_batch(prompts, solutions, [tok.eos_token_id], tok.pad_token_id, run.device)  # + eos
        mask = batch["response_mask"]
        logp = t.response_logprobs(run.train_model, batch["input_ids"], batch["attention_mask"], mask.shape[1], 1.0)[0]
        (-(logp * mask).sum() / mask.sum()).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        if step % 10 == 0:
            acc = t.evaluate(run, -1 - step, a.temperature, limit=check)
        tick(1, note=f"sample accuracy {acc:.2f} of the target {a.sft_target_acc:.2f}")
    tick(a.sft_max_steps - step)  # the steps a warm start that reached its target skipped: the phase ends
    log({"step": 0, "sft/steps": step, "sft/sample_accuracy": acc})


# =====================================================================================
# Datasets: the rows people train and evaluate on (math answers, code test specs)
# =====================================================================================
# Pure functions of a dataset row: the spec that code_reward, run_tests and score_batch grade. delta.py reads
# training rows with them, eval.py benchmarks. Every reader says where its layout comes from; a malformed row
# raises CodeSpecError naming the row, before any program runs. The spec formats (rewards.py, section 1):
#   {"inputs": [stdin text], "outputs": [expected stdout]}                     stdin programs
#   {"fn_name": name, "inputs": [argument lists], "outputs": [return values]}  call-based (class Solution or a function)
#   {"assert": test source, "setup": code run first, "entry_point": name}      assert tests


def load_task(args):
    """(kind, training rows, held-out rows): the embedded task, or a local file or hub dataset read by
    dataset_rows (math or code, every row checked before any work). A DataError says what to change."""
    if not args.dataset:  # one fixed split for every seed: the held-out set never changes
        return ("code" if args.task == "code" else "math",) + TASKS[args.task]["build"](0, args.eval_size)
    kind, train_rows = load_rows(args.dataset, args.dataset_split, args)
    if args.eval_dataset:
        eval_kind, eval_rows = load_rows(args.eval_dataset, "test", args)
        if eval_kind != kind:
            raise DataError(f"--eval_dataset {args.eval_dataset} holds {eval_kind} rows, --dataset {kind} rows")
        return kind, train_rows, eval_rows[:args.eval_size]
    if len(train_rows) <= args.eval_size:
        raise DataError(f"--dataset {args.dataset} has {len(train_rows)} rows, and --eval_size {args.eval_size} "
                        "of them are held out: lower --eval_size or give --eval_dataset")
    return kind, train_rows[args.eval_size:], train_rows[:args.eval_size]


def load_rows(source, split, args):
    """A local .json/.jsonl/.parquet/.csv file or a hub dataset -> (kind, [{"question", "answer"}]), read by
    dataset_rows with --prompt_key, --answer_key and --code_schema."""
    try:
        return dataset_rows(read_table(source, split=split), args.prompt_key, args.answer_key,
                            "math" if args.reward == "math" else args.code_schema)
    except DataError as e:
        raise DataError(f"--{'dataset' if source == args.dataset else 'eval_dataset'} {source}: {e}") from None


class CodeSpecError(DataError):
    """A dataset row whose tests cannot be graded; the message names the row."""


def get_field(row, key):
    """row[key] for a dotted key into nested columns: "reward_model.ground_truth" reads
    row["reward_model"]["ground_truth"] (DAPO-Math-17k and verl's parquet files store the answer so), and a number
    indexes a list ("prompt.0.content": the first chat message's text). A column literally named with the dot wins;
    a nested level stored as a JSON string of an object or list is read as one."""
    if key in row:
        return row[key]
    value, path = row, []
    for part in key.split("."):
        if isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
            value = json.loads(value)
        if isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value, path = value[int(part)], path + [part]
            continue
        if not isinstance(value, dict) or part not in value:
            have = sorted(value) if isinstance(value, dict) else type(value).__name__
            raise KeyError(f"no field {key!r}: {'.'.join(path) or 'the row'} has no {part!r} (it has {have})")
        value, path = value[part], path + [part]
    return value


def _json(value, what):
    """A JSON column: parsed when stored as a string, as it is when already parsed (a parquet struct)."""
    if isinstance(value, (bytes, str)):
        try:
            return json.loads(value)
        except ValueError as e:
            raise CodeSpecError(f"{what} is not JSON: {e}") from None
    return value


def _check(spec, what):
    """_check_spec's rules (and a fn_name that is a name), raised as CodeSpecError naming `what`."""
    try:
        _check_spec(spec)
    except ValueError as e:
        raise CodeSpecError(f"{what}: {e}") from None
    if "fn_name" in spec and not (isinstance(spec["fn_name"], str) and spec["fn_name"].isidentifier()):
        raise CodeSpecError(f"{what}: fn_name {spec['fn_name']!r} is not a function name")
    return spec


def _lines(x):
    """APPS/TACO store some stdin inputs and outputs as lists of lines; their harness joins them with newlines."""
    return "\n".join(map(str, x)) if isinstance(x, list) else x


# ---------------------------------------------------------------------------- LiveCodeBench's private tests
# code_generation_lite stores private_test_cases as base64(zlib(pickle(json_text))): lcb_runner/benchmarks/
# code_generation.py reads them with pickle.loads. A pickle is a program, so it is never unpickled here: the bytes
# are read as the one shape the dataset holds (checked on its public files: PROTO 4, FRAME, BINUNICODE, MEMOIZE,
# STOP, i.e. pickle.dumps of one str), and anything else is refused at its first opcode, before any object exists.
LCB_DECOMPRESSED_LIMIT = 1 << 30  # bytes one problem's private tests may inflate to (zlib bombs are refused)


_PICKLE_STR = {b"X": 4, b"\x8c": 1, b"\x8d": 8}  # BINUNICODE, SHORT_BINUNICODE, BINUNICODE8: length bytes


_PICKLE_MEMO = {b"\x94": 0, b"q": 1, b"r": 4}  # MEMOIZE, BINPUT, LONG_BINPUT: argument bytes


def pickled_str(data):
    """The str that `pickle.dumps(some_str, protocol 2 to 5)` wrote, read without unpickling. Raises ValueError,
    naming the opcode and its offset, for any other pickle (a class, a call, a list, a second object) before
    building anything: the bytes are only scanned until the layout is known to be PROTO [FRAME] STR [MEMO] STOP."""
    def refuse(at, why):
        raise ValueError(f"not a pickled str: {why} at byte {at} (opcode {data[at:at + 1]!r}); only PROTO, FRAME, "
                         "one BINUNICODE and STOP are admitted")
    if data[:1] != b"\x80" or len(data) < 2 or not 2 <= data[1] <= 5:
        refuse(0, "no PROTO 2-5 header")
    at = 2
    if data[at:at + 1] == b"\x95":  # FRAME: 8-byte length of what follows
        if int.from_bytes(data[at + 1:at + 9], "little") != len(data) - at - 9:
            refuse(at, "a FRAME that does not span the rest")
        at += 9
    width = _PICKLE_STR.get(data[at:at + 1])
    if width is None:
        refuse(at, "an opcode that is not a string")
    size = int.from_bytes(data[at + 1:at + 1 + width], "little")
    start, end = at + 1 + width, at + 1 + width + size
    at = end
    if data[at:at + 1] in _PICKLE_MEMO:
        at += 1 + _PICKLE_MEMO[data[at:at + 1]]
    if data[at:at + 1] != b"." or at + 1 != len(data) or end > len(data):
        refuse(min(at, len(data) - 1), "more than one object, or a truncated string")
    return data[start:end].decode("utf-8")  # the layout is known: only now is anything built, and it is a str


def _inflate(data, limit):
    z = zlib.decompressobj()
    out = z.decompress(data, limit + 1)
    if len(out) > limit or z.unconsumed_tail:
        raise ValueError(f"inflates past {limit} bytes")
    return out + z.flush()


def lcb_private_tests(value, limit=LCB_DECOMPRESSED_LIMIT):
    """LiveCodeBench's private_test_cases as a list of {"input", "output", "testtype"}: JSON when stored as JSON
    (release_v1's older rows, and the copies some projects re-save), else base64 -> zlib -> pickled str -> JSON,
    as lcb_runner/benchmarks/code_generation.py does, but through pickled_str instead of pickle.loads."""
    if isinstance(value, list):
        return value
    try:
        return json.loads(value)
    except ValueError:
        pass
    try:
        raw = base64.b64decode(value.encode("ascii") if isinstance(value, str) else value, validate=True)
        return json.loads(pickled_str(_inflate(raw, limit)))
    except (ValueError, zlib.error, UnicodeError) as e:
        raise CodeSpecError(f"private_test_cases: neither JSON nor LiveCodeBench's encoding ({e})") from None


# ---------------------------------------------------------------------------- the readers, one per schema
def lcb_tests_spec(tests, fn_name, what="tests"):
    """LiveCodeBench's test lists ({"input", "output", "testtype": "stdin" | "functional"}) as a spec. A functional
    test's input holds one JSON value per line, the arguments in order, and its output one JSON value, which is
    how lcb_runner/evaluation/testing_util.py's grade_call_based reads them; fn_name is metadata["func_name"]."""
    if not isinstance(tests, list) or not all(isinstance(t, dict) and {"input", "output"} <= set(t) for t in tests):
        raise CodeSpecError(f"{what}: expected a list of {{input, output, testtype}}")
    kinds = {t.get("testtype", "stdin") for t in tests}
    if len(kinds) > 1 or not kinds <= {"stdin", "functional"}:
        raise CodeSpecError(f"{what}: test types {sorted(kinds)}; one of stdin or functional per problem")
    if kinds == {"functional"}:
        if not fn_name:
            raise CodeSpecError(f"{what}: functional tests but no metadata func_name")
        try:
            inputs = [[json.loads(line) for line in t["input"].split("\n")] for t in tests]
            outputs = [json.loads(t["output"]) for t in tests]
        except (ValueError, AttributeError) as e:
            raise CodeSpecError(f"{what}: a functional test is not one JSON value per line ({e})") from None
        return _check({"fn_name": fn_name, "inputs": inputs, "outputs": outputs}, what)
    return _check({"inputs": [t["input"] for t in tests], "outputs": [t["output"] for t in tests]}, what)


def spec_livecodebench(row, private=True):
    """livecodebench/code_generation_lite (lcb_runner/benchmarks/code_generation.py, CodeGenerationProblem):
    public_test_cases (JSON), private_test_cases (JSON or base64/zlib/pickle, see lcb_private_tests), metadata
    (JSON, func_name for LeetCode problems), starter_code. The tests run public first, then private, as
    get_evaluation_sample orders them."""
    meta = _json(row.get("metadata") or "{}", "metadata")
    tests = list(_json(row["public_test_cases"], "public_test_cases"))
    if private and row.get("private_test_cases"):
        tests += lcb_private_tests(row["private_test_cases"])
    return lcb_tests_spec(tests, meta.get("func_name"), "public_test_cases + private_test_cases")


def spec_deepcoder(row):
    """agentica-org/DeepCoder-Preview-Dataset (its dataset card; rllm's deepcoder data preparation): `problem`,
    `tests` (a JSON string) whose shape is its source's: lcbv5 (and the codeforces test split) as LiveCodeBench's
    test list with testtype stdin / functional and the function name in `metadata.func_name` (metadata a dict,
    or JSON); primeintellect as a list with "type" stdin_stdout / function_call; taco as APPS's
    {"inputs", "outputs", "fn_name"}."""
    tests = _json(row["tests"], "tests")
    if isinstance(tests, dict):
        return _apps_spec(tests, "tests")
    if tests and isinstance(tests[0], dict) and "type" in tests[0]:
        return _primeintellect_spec(tests, "tests")
    meta = _json(row.get("metadata") or {}, "metadata")
    return lcb_tests_spec(tests, meta.get("func_name") if isinstance(meta, dict) else None, "tests")


def _primeintellect_spec(cases, what):
    kinds = {c.get("type") for c in cases}
    if kinds == {"stdin_stdout"}:
        return _check({"inputs": [_lines(c["input"]) for c in cases],
                       "outputs": [_lines(c["output"]) for c in cases]}, what)
    if kinds == {"function_call"}:  # arguments as a list (or its JSON), the return value wrapped in a list as APPS does
        names = {c.get("fn_name") for c in cases}
        if len(names) != 1 or None in names:
            raise CodeSpecError(f"{what}: function_call tests name {sorted(map(str, names))}; one fn_name needed")
        return _check({"fn_name": names.pop(), "inputs": [_json(c["input"], "input") for c in cases],
                       "outputs": [_json(c["output"], "output") for c in cases]}, what)
    raise CodeSpecError(f"{what}: test types {sorted(map(str, kinds))}; one of stdin_stdout or function_call")


def spec_primeintellect(row):
    """PrimeIntellect/verifiable-coding-problems (its dataset card): `prompt`, `verification_info` (a JSON string;
    a dict in open-r1's verifiable-coding-problems-python copies) = {"language", "test_cases": [{"type":
    "stdin_stdout" | "function_call", "input", "output", "fn_name"}]}. Only Python problems are graded."""
    info = _json(row["verification_info"], "verification_info")
    if not isinstance(info, dict) or "test_cases" not in info:
        raise CodeSpecError("verification_info: no test_cases")
    if str(info.get("language", "python")).lower() not in ("python", "python3", "py"):
        raise CodeSpecError(f"verification_info: language {info.get('language')!r}; only python is graded")
    return _primeintellect_spec(info["test_cases"], "verification_info.test_cases")


def _apps_spec(io, what):
    if not isinstance(io, dict) or "inputs" not in io or "outputs" not in io:
        raise CodeSpecError(f"{what}: expected {{inputs, outputs[, fn_name]}}")
    if io.get("fn_name"):  # call-based: argument lists; outputs as stored ([value] mostly, which rewards.py accepts)
        return _check({"fn_name": io["fn_name"], "inputs": io["inputs"], "outputs": io["outputs"]}, what)
    return _check({"inputs": [_lines(x) for x in io["inputs"]], "outputs": [_lines(x) for x in io["outputs"]]}, what)


def spec_apps(row):
    """codeparrot/apps and BAAI/TACO (their dataset cards; APPS's eval/testing_util.py): `question`,
    `input_output` (a JSON string) = {"inputs", "outputs", "fn_name" for call-based problems}, `starter_code`.
    stdin inputs and outputs stored as lists of lines are joined with newlines, as APPS's harness does."""
    return _apps_spec(_json(row["input_output"], "input_output"), "input_output")


def spec_jsonl(row, key="tests"):
    """A local .jsonl (or .json/.parquet) whose `key` column holds a rewards.py spec as written, a dict or its JSON:
    stdin, call-based with fn_name, or assert tests. Checked here as rewards.py will check it."""
    spec = _json(get_field(row, key), key)
    if not isinstance(spec, dict):
        raise CodeSpecError(f"{key}: a spec must be an object, got {type(spec).__name__}")
    return _check(spec, key)


# name -> reader, question column, starter-code column, where the layout comes from (one per schema people train on)
CODE_SCHEMAS = {
    "deepcoder": dict(reader=spec_deepcoder, question="problem", starter="starter_code",
                      source="agentica-org/DeepCoder-Preview-Dataset: configs lcbv5, primeintellect, taco, codeforces"),
    "primeintellect": dict(reader=spec_primeintellect, question="prompt", starter=None,
                           source="PrimeIntellect/verifiable-coding-problems "
                                  "(and open-r1/verifiable-coding-problems-python)"),
    "apps": dict(reader=spec_apps, question="question", starter="starter_code", source="codeparrot/apps"),
    "taco": dict(reader=spec_apps, question="question", starter="starter_code", source="BAAI/TACO (APPS's layout)"),
    "livecodebench": dict(reader=spec_livecodebench, question="question_content", starter="starter_code",
                          source="livecodebench/code_generation_lite"),
    "jsonl": dict(reader=spec_jsonl, question="question", starter=None, source="a local file with a spec column"),
}


def code_specs(rows, schema, **reader_args):
    """The spec of every row, all checked before any is used; the first bad row raises CodeSpecError naming it."""
    if schema not in CODE_SCHEMAS:
        raise CodeSpecError(f"unknown code schema {schema!r}; known: {', '.join(CODE_SCHEMAS)}")
    reader, specs = CODE_SCHEMAS[schema]["reader"], []
    for i, row in enumerate(rows):
        try:
            specs.append(reader(row, **reader_args))
        except (CodeSpecError, KeyError, TypeError, AttributeError) as e:
            name = next((row[k] for k in ("question_id", "problem_id", "task_id", "id") if k in row), None)
            raise CodeSpecError(f"row {i}{f' ({name})' if name is not None else ''} of {schema}: {e}") from None
    return specs


# ---------------------------------------------------------------------------- the prompt convention
# LiveCodeBench's generic template (lcb_runner/prompts/code_generation.py): the question, then the starter code
# to complete, or, for a stdin problem, the request to read standard input and write standard output.
LCB_WITH_STARTER = ("You will use the following starter code to write the solution to the problem and enclose your "
                    "code within delimiters.")


LCB_STDIN = ("Read the inputs from stdin solve the problem and write the answer to stdout (do not directly test on "
             "the sample inputs). Enclose your code within delimiters as follows. Ensure that when the python "
             "program runs, it reads the inputs, runs the algorithm and writes output to STDOUT.")


def code_prompt(question, starter_code="", fn_name=None):
    """The user message for a code problem in LiveCodeBench's convention. With starter code (LeetCode's class
    Solution, TACO's def line) the model completes it; a call-based problem without one is told the function's
    name; otherwise it reads standard input."""
    prompt = f"### Question:\n{question}\n\n"
    if starter_code:
        prompt += f"### Format: {LCB_WITH_STARTER}\n```python\n{starter_code}\n```\n\n"
    elif fn_name:
        prompt += (f"### Format: Write a Python function named `{fn_name}`; it is called with each test's arguments "
                   "and its return value is checked. Enclose your code within delimiters.\n```python\n# YOUR CODE "
                   "HERE\n```\n\n")
    else:
        prompt += f"### Format: {LCB_STDIN}\n```python\n# YOUR CODE HERE\n```\n\n"
    return prompt + "### Answer: (use the provided format with backticks)\n\n"


def code_rows(rows, schema, question=None, spec_key="tests"):
    """Rows of a code dataset as (prompt, spec) pairs: the question (the layout's column, or `question`) in
    code_prompt's convention, with the row's starter code; the spec from code_specs (a jsonl spec in `spec_key`)."""
    specs = code_specs(rows, schema, **({"key": spec_key} if schema == "jsonl" else {}))
    layout = CODE_SCHEMAS[schema]
    column, starter = question or layout["question"], layout["starter"]
    return [(code_prompt(str(get_field(r, column)), (r.get(starter) or "") if starter else "",
                         spec.get("fn_name") if "inputs" in spec else None), spec) for r, spec in zip(rows, specs)]


LOCAL_EXTS = (".jsonl", ".json", ".parquet", ".csv")  # GPQA's hub files are CSV


def read_table(path, config=None, split="train"):
    """A local file (LOCAL_EXTS) or a hub dataset's split, as a list of dicts (delta.py's --dataset, eval.py's). A
    file or split that cannot be read is a DataError of one line (a .jsonl or .json file: its first bad line)."""
    import datasets

    ext, level = os.path.splitext(path)[1], datasets.logging.get_verbosity()
    local = ext in LOCAL_EXTS
    if local and os.path.isfile(path) and os.path.getsize(path) == 0:
        raise DataError("the file is empty")
    datasets.logging.set_verbosity(datasets.logging.CRITICAL)  # its own log lines and bars: the error says it all
    datasets.disable_progress_bars()
    try:
        if local:
            rows = list(datasets.load_dataset({".parquet": "parquet", ".csv": "csv"}.get(ext, "json"),
                                              data_files=path, split="train"))
        else:
            rows = list(datasets.load_dataset(path, config, split=split))
    except Exception as e:  # pyarrow's, fsspec's and the hub's errors, raised from deep inside datasets
        why = (json_problem(path) if ext in (".jsonl", ".json") else None) or " ".join(str(e).split())[:300]
        raise DataError(f"cannot be read{'' if local else f' from the hub (split {split})'}: {why}") from None
    finally:
        datasets.logging.set_verbosity(level)
        datasets.enable_progress_bars()
    if not rows:
        raise DataError(f"{'the file' if local else f'split {split}'} holds no rows")
    return rows


def json_problem(path):
    """The first line of a .jsonl file (or the place in a .json file) that is not JSON, said; None: all are."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.readlines() if path.endswith(".jsonl") else [f.read()]
    for n, line in enumerate(lines, 1):
        try:
            if line.strip():
                json.loads(line)
        except ValueError as e:
            jsonl = path.endswith(".jsonl")
            return f"line {n} is not JSON ({e.msg})" if jsonl else f"not JSON at line {e.lineno}: {e.msg}"
    return None


LAYOUT_COLUMNS = {"public_test_cases": "livecodebench", "verification_info": "primeintellect", "input_output": "apps",
                  "tests": "deepcoder"}  # a column that names a code dataset's layout (CODE_SCHEMAS)


def dataset_rows(rows, prompt_key="question", answer_key="final_answer", schema="auto"):
    """A dataset's rows as (kind, [{"question", "answer"[, "solution"]}]): the one reading of rows that delta.py
    (training) and eval.py (--data) share, every row checked before any work (DataError names the first bad one).

    kind "code": schema names a layout of CODE_SCHEMAS, or auto finds one by its columns (LAYOUT_COLUMNS); the
      question is in code_prompt's convention (prompt_key, if not "question", names the question's column) and the
      answer is the row's test spec. kind "math": question from prompt_key, the gold answer from answer_key (dotted
      keys read nested columns). A question is text or, as DAPO-Math-17k and verl's parquet store it, a list of chat
      messages ({"role", "content"}), kept as messages. Rows that delta.py wrote (held_out.jsonl: a "reward" column)
      are read as written: the same prompt and spec the model was trained on, never re-wrapped."""
    rows = list(rows)
    columns = set(rows[0]) if rows else set()
    if schema == "auto" and {"question", "answer", "reward"} <= columns:  # delta.py's held_out.jsonl
        out = []
        for i, r in enumerate(rows):
            if r["reward"] not in ("math", "code") or r["reward"] != rows[0]["reward"]:
                raise DataError(f"row {i}: reward {r['reward']!r}; held-out rows are all math or all code")
            try:
                answer = _check_spec(r["answer"]) if r["reward"] == "code" else r["answer"]
            except ValueError as e:
                raise CodeSpecError(f"row {i}: {e}") from None
            out.append(dict({k: r[k] for k in ("answer_format", "instruction") if k in r},  # how it was trained
                            question=_question(r["question"], i, "question"), answer=answer))
        return rows[0]["reward"], out
    if schema == "auto":
        schema = next((name for column, name in LAYOUT_COLUMNS.items() if column in columns), "math")
    if schema != "math":
        pairs = code_rows(rows, schema, None if prompt_key == "question" else prompt_key, answer_key)
        return "code", [{"question": prompt, "answer": spec} for prompt, spec in pairs]
    out, cut = [], []
    for i, r in enumerate(rows):
        try:
            row = {"question": _question(get_field(r, prompt_key), i, prompt_key, cut),
                   "answer": gold_answer(get_field(r, answer_key), i, answer_key)}
        except KeyError as e:
            raise DataError(f"row {i}: {e.args[0]} (set --prompt_key/--answer_key; a dotted key reads a nested "
                            "column)") from None
        if "solution" in r:  # a worked solution: the tiny default's supervised warm start reads it
            row["solution"] = r["solution"]
        out.append(row)
    if cut and int(os.environ.get("RANK", "0")) == 0:
        print(f"--prompt_key {prompt_key}: {len(cut)} of {len(rows)} chat prompts end after the user's last turn "
              "with other turns (an assistant's solution, as NuminaMath-CoT's and OpenR1's messages): each is cut "
              "before them, so the model never sees the answer", file=sys.stderr)
    return "math", out


def _question(value, i, key, cut=None):
    """A prompt column's value as text or as chat messages (a JSON string of a message list is read as one), the
    messages kept through the user's last turn (a later assistant turn is a solution: the row's index goes to
    `cut`). Anything else is refused, naming --prompt_key."""
    if isinstance(value, str) and value.lstrip().startswith("[{"):
        with contextlib.suppress(ValueError):
            value = json.loads(value)
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)) and value and all(isinstance(m, dict) and isinstance(m.get("content"), str)
                                                          and m.get("role") for m in value):
        last = max((j for j, m in enumerate(value) if m["role"] == "user"), default=None)
        if last is None:
            raise DataError(f"row {i}: --prompt_key {key} holds chat messages without a user turn")
        if last < len(value) - 1 and cut is not None:
            cut.append(i)
        return [{"role": m["role"], "content": m["content"]} for m in value[:last + 1]]
    hint = f": name the text's field, e.g. --prompt_key {key}.{next(iter(value))}" if isinstance(value, dict) else ""
    raise DataError(f"row {i}: --prompt_key {key} holds {type(value).__name__} {str(value)[:80]!r}, neither text nor "
                    f"a list of chat messages with role and content{hint}")


def gold_answer(value, i, key):
    """An answer column's value reduced to the answer by its dataset's convention: GSM8K's worked solution ending
    in `#### 72` gives 72; a text with \\boxed{} its final box (or run of boxes: MATH's solutions); a list of
    answers (a list column, or a JSON list of strings as Skywork-OR1's ground_truth) the list, graded any-of; a
    number or other text itself. An object, a list of anything else or nothing is refused, naming --answer_key."""
    if isinstance(value, str) and value.lstrip().startswith("["):
        with contextlib.suppress(ValueError):
            parsed = json.loads(value)
            if isinstance(parsed, list) and parsed and all(isinstance(x, str) for x in parsed):
                value = parsed  # quoted answers: a list of them ("[1, 2]" unquoted stays text, an interval)
    if isinstance(value, (list, tuple)):
        if not value or not all(isinstance(x, (str, int, float)) and not isinstance(x, bool) for x in value):
            raise DataError(f"row {i}: --answer_key {key} holds a list {str(value)[:80]!r}, not a list of answers")
        golds = [gold_answer(x, i, key) for x in value]
        return golds[0] if len(golds) == 1 else golds
    if isinstance(value, dict):
        field = "ground_truth" if "ground_truth" in value else next(iter(value), "field")
        raise DataError(f"row {i}: --answer_key {key} holds an object with fields {sorted(value)}, not an answer: "
                        f"name the answer's field, e.g. --answer_key {key}.{field}")
    if value is None or (isinstance(value, str) and not value.strip()):
        raise DataError(f"row {i}: --answer_key {key} is empty")
    if isinstance(value, str) and "####" in value:  # GSM8K: the answer is the rest of the line after the last ####
        answer = _HASHES.findall(value)[-1].strip()
        return re.sub(r"(?<=\d),(?=\d{3}\b)", "", answer) or value  # 1,000 -> 1000, as verl's gsm8k reader
    answers = final_answers(value) if isinstance(value, str) and _boxes(value) else []
    return answers[-1] if answers else value


def lcb_in_window(row, start=None, end=None):
    """LiveCodeBench's date window (load_code_generation_dataset): start <= contest_date <= end, the bounds
    YYYY-MM-DD at midnight, so an end date keeps problems dated that day at 00:00 only."""
    date = datetime.datetime.fromisoformat(str(row["contest_date"]))
    after = start is None or datetime.datetime.strptime(start, "%Y-%m-%d") <= date
    return after and (end is None or date <= datetime.datetime.strptime(end, "%Y-%m-%d"))


# LiveCodeBench's release tags (its README; code_generation_lite's loading script): release_vN is test.jsonl up to
# testN.jsonl; vN is testN.jsonl alone (test.jsonl for v1); vA_vB the files A to B.
def lcb_release_files(tag, latest=6):
    name = lambda i: "test.jsonl" if i == 1 else f"test{i}.jsonl"
    m = re.fullmatch(r"release_(?:v(\d+)|latest)|v(\d+)(?:_v(\d+))?", tag)
    if not m:
        raise ValueError(f"unknown LiveCodeBench release {tag!r}: release_vN, release_latest, vN or vA_vB")
    if tag.startswith("release_"):
        return [name(i) for i in range(1, int(m.group(1) or latest) + 1)]
    first, last = int(m.group(2)), int(m.group(3) or m.group(2))
    return [name(i) for i in range(first, last + 1)]
