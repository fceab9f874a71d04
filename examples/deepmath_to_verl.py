"""DeepMath-103K (or any math dataset delta.py reads) as verl's parquet, for examples/verl_delta.sh: the same rows,
the same held-out split and the same prompt as delta.py's run on it.

    python examples/deepmath_to_verl.py --out ~/data/deepmath                    # zwhe99/DeepMath-103K from the hub
    python examples/deepmath_to_verl.py --source rows.parquet --out DIR --eval_size 256
    TRAIN=~/data/deepmath/train.parquet VAL=~/data/deepmath/test.parquet bash examples/verl_delta.sh

Rows are read by tasks.py's load_task (columns --prompt_key and --answer_key, DeepMath's question and
final_answer by default); test.parquet holds the first --eval_size rows, as delta.py holds them out, train.parquet
the rest. Each row in verl's layout: prompt as one user message (the question, a newline and delta.py's
instruction to put the answer in \\boxed{}: delta.prompt_text's content; verl applies the chat template),
data_source, ability, reward_model.ground_truth, extra_info (split, index). --data_source picks verl's scorer
(verl/utils/reward_score/__init__.py, default_compute_score): lighteval/MATH by default, the last \\boxed{} compared
after MATH's normalisation with rewards 1 and 0 as delta.py's (delta.py's rewards.py grades equivalent forms that
this string comparison may not). Prompts longer than data.max_prompt_length are left for verl to drop
(examples/verl_delta.sh sets data.filter_overlong_prompts=True), as delta.py drops them at load time.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import delta  # noqa: E402
import tasks  # noqa: E402
import rewards  # noqa: E402


def verl_rows(rows, split, data_source, instruction):
    """delta.py's rows ({"question", "answer"}) in verl's RLHFDataset layout."""
    content = lambda q: f"{q}\n{instruction}" if instruction else q  # noqa: E731  (delta.prompt_text's content)
    return [{"data_source": data_source, "ability": "math",
             "prompt": [{"role": "user", "content": content(r["question"])}],
             "reward_model": {"style": "rule", "ground_truth": str(r["answer"])},
             "extra_info": {"split": split, "index": i}} for i, r in enumerate(rows)]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--source", default="zwhe99/DeepMath-103K", help="hub id or local .parquet/.jsonl/.json")
    p.add_argument("--split", default="train", help="split of a hub dataset")
    p.add_argument("--prompt_key", default="question", help="column holding the problem")
    p.add_argument("--answer_key", default="final_answer", help="column holding the reference answer")
    p.add_argument("--eval_size", type=int, default=256, help="held-out rows (the first ones, as delta.py)")
    p.add_argument("--data_source", default="lighteval/MATH", help="verl's scorer (default_compute_score)")
    p.add_argument("--instruction", default=rewards.ANSWER_FORMATS["boxed"], help="appended to each question")
    p.add_argument("--out", required=True, help="folder for train.parquet and test.parquet")
    a = p.parse_args(argv)
    import datasets

    args = delta.Args(dataset=a.source, dataset_split=a.split, prompt_key=a.prompt_key, answer_key=a.answer_key,
                      eval_size=a.eval_size, reward="math")
    _, train, held_out = tasks.load_task(args)  # (kind, training rows, held-out rows), as delta.py splits them
    os.makedirs(a.out, exist_ok=True)
    for split, rows in (("train", train), ("test", held_out)):
        path = os.path.join(a.out, f"{split}.parquet")
        datasets.Dataset.from_list(verl_rows(rows, split, a.data_source, a.instruction)).to_parquet(path)
        print(f"{path}: {len(rows)} rows")


if __name__ == "__main__":
    main()
