"""DelTA inside TRL's GRPOTrainer, with delta.py's copyable functions (tested with trl==1.16.0, accelerate 1.15.0,
transformers 5.24, torch 2.13). Any trainer touches three places:

  1. the pass that computes pi_old also yields the LM-head inputs h of every response token (Eq. D);
  2. lam is computed once per rollout batch over all of it (every rank, through the trainer's process group);
  3. the per-token surrogate is multiplied by lam (Eq. E): here TRL's per-token advantages A_i lam_{i,t}.

    python delta.py --warm_start_only --output_dir runs/warm       # the tiny default, warmed up (offline)
    python examples/trl_delta.py --model runs/warm/final             # DelTA in TRL, one process
    torchrun --nproc_per_node 2 examples/trl_delta.py --model runs/warm/final   # two CPU processes (gloo)
    python examples/trl_delta.py --model runs/warm/final --algo dapo # TRL's own DAPO loss, for comparison

TRL internals this relies on (trl/trainer/grpo_trainer.py of 1.16.0): `_generate_and_score_completions` returns
the generation batch with `advantages` [B]; `_compute_loss` accepts [B, T] advantages ("to support subclasses");
`_get_per_token_logps_and_entropies` runs the backbone and a fused LM head on its `last_hidden_state`, so the
head's own forward never runs and h is taken from the decoder's output (`get_decoder()`, inside PEFT's wrapper
too); TRL computes
pi_old in that function, over self.model, before any reference pass, when a generation batch feeds several
optimizer steps (`steps_per_generation` > `gradient_accumulation_steps`, as below) or vLLM samples.
"""
import argparse
import math
import os
import sys

import torch
from trl import GRPOConfig, GRPOTrainer

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from delta import delta_coefficients, token_features  # noqa: E402  the copyable functions (or paste them)


class DeltaGRPOTrainer(GRPOTrainer):
    """GRPOTrainer whose per-token advantages are A_i lam_{i,t} (paper Sec. 3.2, Eq. E). With `loss_type="dapo"`,
    `epsilon=0.2, epsilon_high=0.28` and `delta=10` (TRL's cap of the unclipped ratio, which for A < 0 is DAPO's
    dual clip) the loss is delta.py's `policy_loss(..., lam)`."""

    def __init__(self, *args, lam_min=0.8, lam_max=1.2, K=1, **kwargs):
        self.captured = None  # (h, logp) of the pi_old pass while a rollout is scored
        super().__init__(*args, **kwargs)
        self.lam_min, self.lam_max, self.K = lam_min, lam_max, K

    def _generate_and_score_completions(self, inputs):
        self.captured = []
        try:
            out = super()._generate_and_score_completions(inputs)  # sampled, rewarded, group advantages [B]
        finally:
            captured, self.captured = self.captured, None
        h, logp = captured[0] if captured else self.lm_head_inputs(out)  # 1. [B, T, H], [B, T]
        out["advantages"] = out["advantages"][:, None] * self.delta_lam(out, h, logp)  # 3. Eq. E  [B, T]
        return out

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, *args, **kwargs):
        """TRL's log-prob pass. While a rollout is scored, the pass over self.model is the one that yields pi_old
        (TRL runs it first, before any reference pass): a hook on the backbone keeps h, its last hidden state
        (after the final norm) at the positions that predict each completion token."""
        if self.captured is None or model is not self.model:
            return super()._get_per_token_logps_and_entropies(model, input_ids, attention_mask, logits_to_keep,
                                                               *args, **kwargs)
        hidden = []
        backbone = self.accelerator.unwrap_model(model)
        backbone = backbone.get_base_model() if hasattr(backbone, "get_base_model") else backbone  # PEFT's model
        hook = backbone.get_decoder().register_forward_hook(  # the decoder: whatever calls it, under any wrapper
            lambda m, i, o: hidden.append(o.last_hidden_state[:, -logits_to_keep - 1:-1]))
        try:
            result = super()._get_per_token_logps_and_entropies(model, input_ids, attention_mask, logits_to_keep,
                                                                 *args, **kwargs)
        finally:
            hook.remove()
        self.captured.append((torch.cat(hidden), result[0]))  # [B, T, H], [B, T]
        return result

    @torch.no_grad()
    def lm_head_inputs(self, out):
        """One no-grad log-prob pass for h and pi_old, when TRL ran none: with one optimizer step per generation
        batch TRL takes pi_old = pi at the update and skips it."""
        ids = torch.cat([out["prompt_ids"], out["completion_ids"]], 1)  # [B, P + T]
        attention, self.captured = torch.cat([out["prompt_mask"], out["completion_mask"]], 1), []
        try:
            self._get_per_token_logps_and_entropies(self.model, ids, attention, out["completion_ids"].shape[1],
                                                    batch_size=self.args.per_device_train_batch_size)
            return self.captured[0]
        finally:
            self.captured = None

    @torch.no_grad()
    def delta_lam(self, out, h, logp):
        """lam [B, T] of this rank's rows, computed over the whole generation batch of every rank."""
        mask = out["completion_mask"].bool() & out.get("tool_mask", out["completion_mask"]).bool()  # [B, T]
        group = torch.distributed.group.WORLD if self.accelerator.num_processes > 1 else None  # 2. the batch's ranks
        stats = {}
        lam = delta_coefficients(token_features(h, logp), out["advantages"], mask, self.K, self.lam_min, self.lam_max,
                                 stats=stats, group=group)  # [B, T]
        for k in ("disc_acc", "scale"):
            self._metrics["train" if self.model.training else "eval"][f"delta/{k}"].append(stats[k])
        return lam


def addition_data(n_eval=256):
    """delta.py's embedded addition task (tasks.py) as TRL conversational prompts (the tiny model's chat template)."""
    import tasks
    from datasets import Dataset

    rows = lambda part: Dataset.from_list([{"prompt": [{"role": "user", "content": r["question"]}],  # noqa: E731
                                            "answer": r["answer"]} for r in part])
    train, held_out = tasks.TASKS["addition"]["build"](0, n_eval)
    return rows(train), held_out


def correct(completions, answer, **_):
    """The reward: rewards.py's verdict, 1 right, 0 wrong."""
    import rewards

    return rewards.score_batch([c[-1]["content"] for c in completions], answer)


@torch.no_grad()
def accuracy(model, tok, rows, rank=0, world=1, batch=64):
    """Greedy held-out accuracy, prompts through the chat template as in training, rows shared out over the
    ranks with as many generate calls on each (under FSDP or ZeRO-3 every rank takes part in every forward)."""
    import rewards

    mine, tok.padding_side = rows[rank::world], "left"
    calls = math.ceil(math.ceil(len(rows) / world) / batch)  # the same on every rank
    right, was_training = 0.0, model.training
    model.eval()
    for c in range(calls):
        part = mine[c * batch:(c + 1) * batch] or rows[:1]  # a call only to keep the ranks in step counts nothing
        prompts = [tok.apply_chat_template([{"role": "user", "content": r["question"]}], tokenize=False,
                                           add_generation_prompt=True) for r in part]
        x = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
        y = model.generate(**x, max_new_tokens=64, do_sample=False, pad_token_id=tok.pad_token_id)
        if c * batch < len(mine):
            texts = tok.batch_decode(y[:, x.input_ids.shape[1]:], skip_special_tokens=True)
            right += sum(rewards.score_batch(texts, [r["answer"] for r in part]))
    model.train(was_training)
    counts = torch.tensor([right, float(len(mine))], device=model.device)
    if world > 1:
        torch.distributed.all_reduce(counts)
    return float(counts[0] / counts[1])


def config(out, steps, lr=1e-4, prompts=32, group=8, mini_batch_prompts=16, max_new_tokens=64, seed=0,
           temperature=1.0):
    """delta.py's defaults in TRL's terms: `prompts` x `group` completions per generation, one optimizer step
    per `mini_batch_prompts` prompts, constant lr, DAPO's clip-higher and dual clip."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    return GRPOConfig(output_dir=out, max_steps=steps, learning_rate=lr, lr_scheduler_type="constant",
                      weight_decay=0.1, max_grad_norm=1.0, num_generations=group,
                      per_device_train_batch_size=mini_batch_prompts * group // world,
                      steps_per_generation=prompts // mini_batch_prompts, max_completion_length=max_new_tokens,
                      temperature=temperature, top_p=1.0, loss_type="dapo", scale_rewards="group", epsilon=0.2,
                      epsilon_high=0.28, delta=10.0, beta=0.0, use_cpu=not torch.cuda.is_available(),
                      bf16=torch.cuda.is_available(), report_to="none", save_strategy="no", logging_steps=1,
                      activation_checkpointing=False, seed=seed, disable_tqdm=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="runs/warm/final", help="a warmed-up model: delta.py --warm_start_only")
    p.add_argument("--algo", default="delta", choices=("delta", "dapo"), help="DelTA, or TRL's own DAPO loss")
    p.add_argument("--steps", type=int, default=100, help="optimizer steps (2 per generation batch)")
    p.add_argument("--output_dir", default="runs/trl-delta")
    args = p.parse_args()
    if not os.path.isdir(args.model):
        sys.exit(f"{args.model}: no such folder; make one: python delta.py --warm_start_only --output_dir runs/warm")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model, tok = AutoModelForCausalLM.from_pretrained(args.model), AutoTokenizer.from_pretrained(args.model)
    train, held_out = addition_data()
    trainer_class = DeltaGRPOTrainer if args.algo == "delta" else GRPOTrainer
    trainer = trainer_class(model=model, reward_funcs=correct, args=config(args.output_dir, args.steps),
                            train_dataset=train, processing_class=tok)
    ranks = trainer.accelerator.process_index, trainer.accelerator.num_processes
    before = accuracy(model, tok, held_out, *ranks)
    trainer.train()
    after = accuracy(trainer.model, tok, held_out, *ranks)  # every rank: a sharded model needs them all
    if trainer.accelerator.is_main_process:
        print(f"held-out greedy accuracy: {before:.3f} -> {after:.3f}")


if __name__ == "__main__":
    main()
