"""The offline default: a character tokenizer, a Qwen3 of about 0.5 M parameters, and the embedded tasks
(delta.py --task addition, multistep, filler, code). Each task builds (training rows, held-out rows) of
{"question", "answer", "solution"}; the solutions warm-start the tiny model (warm_start, below) until RL can learn.
Nothing here imports delta.py (warm_start is handed its functions).
"""
import itertools
import random

import torch
import transformers
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

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
    tick = t.progress(a, run.rank, "warm start", a.sft_max_steps, "steps", bound=True)  # ends at the target
    while acc < a.sft_target_acc and step < a.sft_max_steps:
        if t.stopped(run):  # SIGINT or SIGTERM: train() says so and ends; nothing is saved before RL's first step
            run.warm_state = (f"step {step} of at most {a.sft_max_steps}, sample accuracy {acc:.2f} of the target "
                              f"{a.sft_target_acc:.2f}")
            return
        idx = torch.randint(len(run.train_rows), (a.sft_batch_size,), generator=gen)
        rows = [run.train_rows[i] for i in idx[run.rank * per_rank:(run.rank + 1) * per_rank]]
        prompts = [t.encode_prompt(tok, t.prompt_text(tok, r["question"], a.instruction)) for r in rows]
        solutions = [tok(r["solution"], add_special_tokens=False).input_ids + [tok.eos_token_id] for r in rows]
        batch = t.rollout_batch(prompts, solutions, [tok.eos_token_id], tok.pad_token_id, run.device)  # + eos
        mask = batch["response_mask"]
        logp = t.response_logprobs(run.train_model, batch["input_ids"], batch["attention_mask"], mask.shape[1], 1.0)[0]
        (-(logp * mask).sum() / mask.sum()).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        if step % 10 == 0:
            acc = t.evaluate(run, -1 - step, a.temperature, limit=check)
        tick(1, note=f"sample accuracy {acc:.2f} of the target {a.sft_target_acc:.2f}")
    log({"step": 0, "sft/steps": step, "sft/sample_accuracy": acc})
