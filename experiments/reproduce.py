"""The paper's Table 1 in miniature: the embedded tasks, the paper's baselines and DelTA's ablations over
seeds, at equal RL steps, through delta.py exactly as a user runs it.

    python experiments/reproduce.py             # delta, dapo (5 seeds), grpo, forking, sapo, fipo (3 seeds), both tasks
    python experiments/reproduce.py --ablations    # also DelTA's ablations (3 seeds)
    python experiments/reproduce.py --report_only  # tables and plots from the runs already on disk
    python experiments/reproduce.py --tasks addition --methods delta,dapo --seeds 2 --steps 50   # a quick look

Runs go to runs/reproduce/<task>/<method>/s<seed>/ (metrics.jsonl and the model), two at a time on two
cores; a finished run is not run again. Then it writes docs/reproduce.md (held-out accuracy at the end
and the area under the accuracy curve, mean +- 95 % CI over seeds, the paired difference DelTA - DAPO,
and per-category lambda of DelTA where the runs logged it, as the runs of this page's commit did; newer runs
measure it from rollout dumps with tools/rollouts.py) and docs/reproduce-<task>.png (accuracy, response length and
entropy against the step, a band over seeds). The plots need matplotlib (pip install matplotlib).
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
METHODS = {  # name -> delta.py arguments; every run also gets --task, --seed and the shared arguments
    "delta": ["--algo", "delta"],
    "dapo": ["--algo", "dapo"],
    "grpo": ["--algo", "grpo"],
    "forking": ["--algo", "forking"],
    "sapo": ["--algo", "sapo"],
    "fipo": ["--algo", "fipo"],
}
ABLATIONS = {  # DelTA with one component removed (paper Sec. 5)
    "delta, within-side only": ["--algo", "delta", "--delta_margin", "own"],
    "delta, no refinement": ["--algo", "delta", "--K", "0"],
    "delta, fixed gamma 1": ["--algo", "delta", "--delta_gamma", "1.0"],
    "delta, hard assignment": ["--algo", "delta", "--delta_assign", "hard"],
    "delta, no mass normalisation": ["--algo", "delta", "--delta_normalise", "false"],
    "delta, no linear map": ["--algo", "delta", "--lam_min", "0", "--lam_max", "1"],
}
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
        2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
        2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]  # df 1..30


def folder_name(method):
    return method.replace(", ", "-").replace(" ", "-")


def folder(out, task, method, seed):
    return os.path.join(out, task, folder_name(method), f"s{seed}")


def run_all(jobs_list, parallel, threads):
    """Run `python script --output_dir folder *argv` for every (folder, argv, script) whose final/ is missing,
    `parallel` at a time. A job whose --model is another job's final/ (a shared warm start) waits for it."""
    pending = [job for job in jobs_list if not os.path.exists(os.path.join(job[0], "final"))]
    made = {os.path.join(d, "final") for d, _, _ in jobs_list}
    running, started = [], time.time()
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), PYTHONWARNINGS="ignore")
    while pending or running:
        for job in list(pending):
            d, argv, script = job
            needs = argv[argv.index("--model") + 1] if "--model" in argv else None
            if len(running) >= parallel or (needs in made and not os.path.exists(needs)):
                continue
            pending.remove(job)
            shutil.rmtree(d, ignore_errors=True)  # an unfinished run starts over
            os.makedirs(d)
            log = open(os.path.join(d, "stderr.log"), "w")
            running.append((d, subprocess.Popen([sys.executable, script, "--output_dir", d, *argv], cwd=ROOT,
                                                env=env, stdout=subprocess.DEVNULL, stderr=log), log))
            print(f"[{time.time() - started:7.0f} s] start {d}", flush=True)
        if pending and not running:
            raise RuntimeError(f"{pending[0][0]} waits for a warm start that no run makes")
        time.sleep(2)
        for item in list(running):
            d, proc, log = item
            if proc.poll() is not None:
                log.close()
                running.remove(item)
                status = "done" if proc.returncode == 0 else f"FAILED ({proc.returncode}), see {d}/stderr.log"
                print(f"[{time.time() - started:7.0f} s] {status} {d}", flush=True)
    return time.time() - started


def read(d):
    return [json.loads(line) for line in open(os.path.join(d, "metrics.jsonl"))]


KEPT = "## Readings, corrected"  # a section of docs/reproduce.md written by hand, kept when the page is made again
STEPS = [None]  # the step every report ends at (--steps): a longer run is cut there, and equals a run of that length


def curve(rows, key):
    pts = {}
    for r in rows:
        if key in r and 0 <= r["step"] <= (STEPS[0] or r["step"]):
            pts[r["step"]] = r[key]
    return sorted(pts.items())


def area(points):
    """Area under the held-out accuracy curve, as a mean accuracy over the run (trapezoids over steps)."""
    if len(points) < 2:
        return points[0][1] if points else float("nan")
    total = sum((s1 - s0) * (a0 + a1) / 2 for (s0, a0), (s1, a1) in zip(points, points[1:]))
    return total / (points[-1][0] - points[0][0])


def mean_ci(values):
    """The mean, the sample sd and the half-width of the 95 % t interval."""
    n = len(values)
    m = sum(values) / n
    if n < 2:
        return m, float("nan"), float("nan")
    sd = math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1))
    return m, sd, (T975[n - 2] if n - 1 <= len(T975) else 1.96) * sd / math.sqrt(n)


def fmt(values, scale=100):
    m, _, ci = mean_ci(values)
    return f"{scale * m:.1f} ± {scale * ci:.1f}" if ci == ci else f"{scale * m:.1f}"


def report(out, tasks, methods, seeds_of, docs, wall):
    lines = ["# Miniature Table 1", "",
             f"Made by `python experiments/reproduce.py {' '.join(a for a in sys.argv[1:] if a != '--report_only')}` "
             f"(wall time of the runs: {wall / 60:.0f} min). "
             "Held-out accuracy (greedy, 256 problems) in %, mean ± 95 % CI over seeds (t distribution).", ""]
    for task in tasks:
        lines += [f"## Task `{task}`", "", "| method | seeds | before RL | end of RL | area under the curve |",
                  "|---|---|---|---|---|"]
        finals = {}
        for method in methods:
            runs = [folder(out, task, method, s) for s in seeds_of(method)]
            runs = [d for d in runs if os.path.exists(os.path.join(d, "final"))]
            if not runs:
                continue
            acc = [curve(read(d), "eval/accuracy") for d in runs]
            finals[method] = {d: a[-1][1] for d, a in zip(runs, acc)}
            lines.append(f"| {method} | {len(runs)} | {fmt([a[0][1] for a in acc])} | {fmt([a[-1][1] for a in acc])} | "
                         f"{fmt([area(a) for a in acc])} |")
        if "delta" in finals and "dapo" in finals:  # paired by seed: the same warm start and held-out set
            pairs = [(finals["delta"][d], finals["dapo"][d.replace("/delta/", "/dapo/")])
                     for d in finals["delta"] if d.replace("/delta/", "/dapo/") in finals["dapo"]]
            diffs = [a - b for a, b in pairs]
            lines += ["", f"Paired difference DelTA - DAPO at the end of RL: {fmt(diffs)} points "
                      f"over {len(diffs)} seeds "
                      f"(per seed: {', '.join(f'{100 * x:+.1f}' for x in diffs)})."]
        ablations = [m for m in methods if m in ABLATIONS and m in finals and "delta" in finals]
        if ablations:  # paired by seed, like DelTA - DAPO: each ablation against the full method
            lines += ["", "Each ablation against DelTA with the same seed (ablation - DelTA, points):", "",
                      "| ablation | seeds | end of RL | area under the curve |", "|---|---|---|---|"]
            for m in ablations:
                full = lambda d: d.replace(f"/{folder_name(m)}/", "/delta/")  # DelTA's run with the same seed
                same = [d for d in finals[m] if full(d) in finals["delta"]]
                end = [finals[m][d] - finals["delta"][full(d)] for d in same]
                auc = [area(curve(read(d), "eval/accuracy")) - area(curve(read(full(d)), "eval/accuracy"))
                       for d in same]
                lines.append(f"| {m} | {len(same)} | {fmt(end)} | {fmt(auc)} |")
        cats = category_table(out, task, seeds_of)
        if cats:
            lines += ["", "DelTA's coefficients by token category (mean lam over all RL steps and seeds; "
                      "+ correct responses, - incorrect):", "",
                      "| category | lam, + side | lam, - side |", "|---|---|---|"]
            lines += [f"| {c} | {p} | {n} |" for c, p, n in cats]
        lines.append("")
        plot(out, task, methods, seeds_of, docs)
        lines += [f"![{task}](reproduce-{task}.png)", ""]
    text, page = "\n".join(lines), os.path.join(docs, "reproduce.md")
    old = open(page).read() if os.path.exists(page) else ""
    if KEPT in old:  # the readings written by hand after an audit stay at the end of the page
        text += "\n" + KEPT + old.split(KEPT, 1)[1]
    with open(page, "w") as f:
        f.write(text)
    print(text)


def category_table(out, task, seeds_of):
    sums = {}
    for s in seeds_of("delta"):
        d = folder(out, task, "delta", s)
        if not os.path.exists(os.path.join(d, "metrics.jsonl")):
            continue
        for r in read(d):
            if STEPS[0] and r["step"] > STEPS[0]:
                continue
            for k, v in r.items():
                if k.startswith("lam/"):
                    sums.setdefault(k, []).append(v)
    rows = []
    for cat in ("format", "restated", "result", "first_wrong", "answer", "eos"):
        p, n = sums.get(f"lam/{cat}/pos"), sums.get(f"lam/{cat}/neg")
        if p or n:
            rows.append((cat, f"{sum(p) / len(p):.3f}" if p else "-", f"{sum(n) / len(n):.3f}" if n else "-"))
    return rows


def plot(out, task, methods, seeds_of, docs):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plots (pip install matplotlib)", file=sys.stderr)
        return
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.2))
    for ax, (key, label) in zip(axes, (("eval/accuracy", "held-out accuracy"), ("response/length", "response length"),
                                       ("entropy/trained", "entropy of the rows trained"))):
        for method in methods:
            runs = [folder(out, task, method, s) for s in seeds_of(method)]
            curves = [dict(curve(read(d), key)) for d in runs if os.path.exists(os.path.join(d, "final"))]
            if not curves:
                continue
            steps = sorted(set.intersection(*(set(c) for c in curves)))
            mean = [sum(c[s] for c in curves) / len(curves) for s in steps]
            lo = [min(c[s] for c in curves) for s in steps]
            hi = [max(c[s] for c in curves) for s in steps]
            style = "-" if method in ("delta", "dapo") else "--" if "," not in method else ":"
            line, = ax.plot(steps, mean, style, label=f"{method} ({len(curves)})",
                            lw=2 if method in ("delta", "dapo") else 1.2)
            ax.fill_between(steps, lo, hi, color=line.get_color(), alpha=0.12)
        ax.set_title(label)
        ax.set_xlabel("RL step")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"task {task}: mean over seeds, band from the lowest to the highest seed")
    fig.tight_layout()
    fig.savefig(os.path.join(docs, f"reproduce-{task}.png"), dpi=90)
    plt.close(fig)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", default="addition,multistep")
    p.add_argument("--methods", default="delta,dapo,grpo,forking,sapo,fipo")
    p.add_argument("--ablations", action="store_true", help="also run DelTA's ablations")
    p.add_argument("--seeds", type=int, default=5, help="seeds of delta and dapo")
    p.add_argument("--other_seeds", type=int, default=3, help="seeds of every other method and ablation")
    p.add_argument("--steps", type=int, default=200, help="RL steps of every run")
    p.add_argument("--parallel", type=int, default=2, help="runs at a time")
    p.add_argument("--out", default=os.path.join(ROOT, "runs", "reproduce"))
    p.add_argument("--docs", default=os.path.join(ROOT, "docs"))
    p.add_argument("--report_only", action="store_true")
    args, extra = p.parse_known_args()
    tasks = args.tasks.split(",")
    methods = args.methods.split(",") + (list(ABLATIONS) if args.ablations else [])
    spec = dict(METHODS, **ABLATIONS)
    seeds_of = lambda m: range(args.seeds if m in ("delta", "dapo") else args.other_seeds)
    common = ["--max_steps", str(args.steps), "--eval_every", "10", "--save_every", "0", "--progress", "false", *extra]
    jobs = [(folder(args.out, t, m, s), spec[m] + ["--task", t, "--seed", str(s), *common], "delta.py")
            for s in range(max(args.seeds, args.other_seeds)) for t in tasks for m in methods if s in seeds_of(m)]
    clock = os.path.join(args.out, "wall_time.json")  # summed over invocations, since finished runs are kept
    wall = json.load(open(clock))["seconds"] if os.path.exists(clock) else 0.0
    if not args.report_only:
        wall += run_all(jobs, args.parallel, max(1, (os.cpu_count() or 2) // args.parallel))
        os.makedirs(args.out, exist_ok=True)
        with open(clock, "w") as f:
            json.dump({"seconds": wall}, f)
    os.makedirs(args.docs, exist_ok=True)
    STEPS[0] = args.steps
    report(args.out, tasks, methods, seeds_of, args.docs, wall)


if __name__ == "__main__":
    main()
