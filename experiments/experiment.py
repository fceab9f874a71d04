"""The controlled test of "DelTA beats DAPO" (docs/experiment.md holds the rule fixed before the runs).

    python experiments/experiment.py --arms dapo,oracle --seeds 0-5  # stage 1: the positive control
    python experiments/experiment.py --arms delta,lam_top,lam_bottom --seeds 0-5
    python experiments/experiment.py --report                         # the tables of docs/experiment.md

Every run trains on the embedded `filler` task (SETTINGS below, the same for every arm) from the warm
start of its seed, which is made once (`delta.py --warm_start_only`) and shared by the arms, so that the
arms of a seed start from the same model and sample the same first rollout: they are compared in pairs.
Runs go to runs/experiment/<arm>/s<seed>/, two at a time (one thread each); a finished run is kept and
not run again, and the wall time of every invocation is added to runs/experiment/wall_time.json.
The report: per arm and pair, the primary metric (the area under the curve of sampled held-out accuracy:
the trapezoid mean over steps 0..80 of eval/sampled_accuracy, 4 samples of each of 256 held-out problems
at temperature 1), the secondary metrics, the paired differences with t intervals, and where the update
goes per token category (tools/rollouts.py over the rollouts dumped every 20 steps).
"""
import argparse
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))  # rollouts
from reproduce import area, mean_ci, read, run_all as run_jobs  # noqa: E402  the runner and statistics, shared

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETTINGS = ["--task", "filler", "--prompts_per_step", "16", "--group_size", "8", "--mini_batch_prompts", "8",
            "--lr", "5e-5", "--max_steps", "80", "--eval_every", "10", "--eval_samples", "4", "--eval_size", "256",
            "--max_new_tokens", "128", "--save_every", "0", "--dump_rollouts_every", "20", "--progress", "false"]
ARMS = ("dapo", "oracle", "delta", "lam_top", "lam_bottom")


def run_all(jobs, out, parallel=2):
    """reproduce.run_all, one thread a run (the oracle is an ALGOS entry from outside: tools/oracle.py runs it),
    and the wall time added to out/wall_time.json, summed over invocations."""
    seconds = run_jobs([(d, argv, "tools/oracle.py" if "oracle" in argv else "delta.py") for d, argv in jobs],
                       parallel, threads=1)
    clock = os.path.join(out, "wall_time.json")
    total = (json.load(open(clock))["seconds"] if os.path.exists(clock) else 0.0) + seconds
    with open(clock, "w") as f:
        json.dump({"seconds": total, "note": "summed over every invocation of experiments/experiment.py"}, f)


def seeds(spec):
    lo, _, hi = spec.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def metrics(d):
    rows = read(d)
    curve = lambda key: [(r["step"], r[key]) for r in rows if key in r]
    sampled, greedy = curve("eval/sampled_accuracy"), curve("eval/accuracy")
    steps = [r for r in rows if "reward/acc" in r]
    return {"auc_sampled": area(sampled), "final_sampled": sampled[-1][1], "auc_greedy": area(greedy),
            "final_greedy": greedy[-1][1], "start_sampled": sampled[0][1],
            "length": sum(r["response/length"] for r in steps[-10:]) / 10,
            "entropy": sum(r["entropy/trained"] for r in steps[-10:]) / 10,  # the rows of non-zero advantage
            "seconds": sum(r["time/generate"] + r["time/score"] + r["time/train"] for r in steps)}


def gate(done):
    """docs/experiment.md's gate: the oracle's paired AUC difference from DAPO positive, its 95 % interval above 0."""
    common = sorted(set(done["oracle"]) & set(done["dapo"]))
    if len(common) < 2:
        return None
    m, _, ci = mean_ci([100 * (done["oracle"][s]["auc_sampled"] - done["dapo"][s]["auc_sampled"]) for s in common])
    return m - ci > 0


def report(out):
    done = {arm: {int(d.rsplit("s", 1)[1]): metrics(d) for d in sorted(glob.glob(os.path.join(out, arm, "s*")))
                  if os.path.exists(os.path.join(d, "final"))} for arm in ARMS}
    passed = gate(done)
    if passed is False:  # the rule: no DelTA-vs-DAPO comparison on a task the positive control cannot pass
        done = {arm: runs if arm in ("dapo", "oracle") else {} for arm, runs in done.items()}
    lines = ["| arm | runs | start (sampled) | AUC sampled | final sampled | AUC greedy | final greedy | "
             "length (last 10) | entropy of rows trained (last 10) |", "|---" * 9 + "|"]
    for arm, runs in done.items():
        if runs:
            col = lambda k: "{:.1f} ± {:.1f}".format(*[100 * x for x in mean_ci([r[k] for r in runs.values()])[::2]])
            plain = lambda k: f"{sum(r[k] for r in runs.values()) / len(runs):.2f}"
            lines.append(f"| {arm} | {len(runs)} | {col('start_sampled')} | {col('auc_sampled')} "
                         f"| {col('final_sampled')} | {col('auc_greedy')} | {col('final_greedy')} "
                         f"| {plain('length')} | {plain('entropy')} |")
    lines += ["", "Paired differences against DAPO (same seed), points: mean ± 95 % t interval, sd of the differences",
              "", ("| arm - dapo | pairs | AUC sampled (primary) | sd | final sampled | AUC greedy "
                   "| per seed (AUC sampled) |"),
              "|---|---|---|---|---|---|---|"]
    for arm in ARMS[1:]:
        common = sorted(set(done[arm]) & set(done["dapo"]))
        if len(common) >= 2:
            d = {k: [100 * (done[arm][s][k] - done["dapo"][s][k]) for s in common]
                 for k in ("auc_sampled", "final_sampled", "auc_greedy")}
            m, sd, ci = mean_ci(d["auc_sampled"])
            lines.append(f"| {arm} | {len(common)} | {m:+.2f} ± {ci:.2f} | {sd:.2f} | "
                         "{:+.2f} ± {:.2f} | ".format(*mean_ci(d["final_sampled"])[::2]) +
                         "{:+.2f} ± {:.2f} | ".format(*mean_ci(d["auc_greedy"])[::2]) +
                         ", ".join(f"{x:+.1f}" for x in d["auc_sampled"]) + " |")
    lines += ["", "Gate (the oracle above DAPO, 95 % interval above 0): " +
              {None: "not yet decided", True: "passed", False: "failed: the task cannot test claim (a), so no arm is "
               "compared with DAPO on it"}[passed]]
    lines += claim_b(out, "delta") + claim_b(out, "oracle")
    wall = os.path.join(out, "wall_time.json")
    if os.path.exists(wall):
        lines += ["", f"Wall time of every invocation, summed: {json.load(open(wall))['seconds'] / 60:.0f} min."]
    return "\n".join(lines)


def claim_b(out, arm="delta"):
    """Where an arm's update goes (DelTA's: claim (b)), per token category and side, from every dump of its
    finished runs: tools/rollouts.py's statistics averaged over dumps and seeds."""
    import rollouts

    rows = [dict(rollouts.category_stats(*rollouts.load(f)))
            for d in sorted(glob.glob(os.path.join(out, arm, "s*"))) if os.path.exists(os.path.join(d, "final"))
            for f in sorted(glob.glob(os.path.join(d, "rollout-*.pt")))]
    if not rows:
        return []
    avg = lambda k: (sum(r[k] for r in rows if k in r) / n if (n := sum(k in r for r in rows)) else None)  # noqa
    cell = lambda k: "-" if avg(k) is None else f"{avg(k):.3f}"  # noqa: E731
    lines = ["", f"{'Claim (b): ' if arm == 'delta' else ''}{arm}'s weights by token category, "
             f"the mean over {len(rows)} "
             f"dumped rollouts of its runs (lam: per token; lamw: per unit of update, |A| ||v||; share: of the side's "
             f"update under {arm}'s weights, and under DAPO's uniform weights on the same rollouts)", "",
             f"| category | lam + | lam - | lamw + | lamw - | share + ({arm} / DAPO) | share - ({arm} / DAPO) |",
             "|---|---|---|---|---|---|---|"]
    for name in rollouts.CATEGORIES:
        if avg(f"lam/{name}/pos") is None and avg(f"lam/{name}/neg") is None:
            continue
        lines.append(f"| {name} | {cell(f'lam/{name}/pos')} | {cell(f'lam/{name}/neg')} | {cell(f'lamw/{name}/pos')} | "
                     f"{cell(f'lamw/{name}/neg')} | "
                     f"{cell(f'share/{name}/pos')} / {cell(f'share_uniform/{name}/pos')} | "
                     f"{cell(f'share/{name}/neg')} / {cell(f'share_uniform/{name}/neg')} |")
    lines += ["", f"Spearman correlation of lam with the token's probability: + side {cell('rho_p/pos')}, "
              f"- side {cell('rho_p/neg')}."]
    return lines


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--arms", default="dapo,oracle", help=f"comma list of {', '.join(ARMS)}")
    p.add_argument("--seeds", default="0-5", help="a seed or a range lo-hi")
    p.add_argument("--out", default=os.path.join(ROOT, "runs", "experiment"))
    p.add_argument("--report", action="store_true", help="only print the tables of the finished runs")
    args = p.parse_args()
    if not args.report:
        jobs = []
        for s in seeds(args.seeds):
            warm = os.path.join(args.out, "warm", f"s{s}")
            jobs.append((warm, ["--warm_start_only", "--seed", str(s), *SETTINGS]))
            jobs += [(os.path.join(args.out, arm, f"s{s}"), ["--algo", arm, "--seed", str(s), "--model",
                                                              os.path.join(warm, "final"), *SETTINGS])
                     for arm in args.arms.split(",")]
        os.makedirs(args.out, exist_ok=True)
        run_all(jobs, args.out)
    print(report(args.out))


if __name__ == "__main__":
    main()
