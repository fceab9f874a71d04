#!/usr/bin/env bash
# DelTA in stock verl 0.9.1 with the paper's recipe (Sec. 4): Qwen3-8B-Base on DeepMath-103K, 8 GPUs, as verl's
# hydra overrides. The same run with delta.py is docs/scale.md's command; the values below are the same ones.
#
#   pip install "verl[vllm]==0.9.1"                   # on the GPU machine (vLLM rollouts; torch 2.11 + CUDA)
#   python examples/deepmath_to_verl.py --out ~/data/deepmath   # DeepMath-103K as verl's parquet, delta.py's split
#   TRAIN=~/data/deepmath/train.parquet VAL=~/data/deepmath/test.parquet bash examples/verl_delta.sh
#   bash examples/verl_delta.sh --print              # the overrides, one per line (test_verl.py composes them)
#   bash examples/verl_delta.sh actor_rollout_ref.actor.policy_loss.loss_mode=vanilla   # verl's own DAPO, same run
#
# TRAIN and VAL: verl's parquet layout (columns prompt as chat messages, data_source, reward_model.ground_truth;
# verl's scorer is chosen by data_source: examples/deepmath_to_verl.py writes it). Extra arguments are appended, so
# they win. Attention: verl's actor defaults to flash_attention_2, which verl[vllm]==0.9.1 does not install: SDPA
# here, so the recipe starts as installed (with flash-attn installed, override attn_implementation=flash_attention_2
# for speed and no [T, T] mask; docs/verl.md books both).
# DelTA: external_lib imports examples/verl_delta.py in every worker (PYTHONPATH below, passed to Ray's workers),
# loss_mode=delta is the switch (and the loud failure when the plugin is missing); K = 1 and lam in [0.8, 1.2] are
# the plugin's defaults, set here explicitly through its environment (DELTA_*) so every worker reads the same.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
MODEL=${MODEL:-Qwen/Qwen3-8B-Base}
TRAIN=${TRAIN:-$HOME/data/deepmath/train.parquet}
VAL=${VAL:-$HOME/data/deepmath/test.parquet}
PYPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}"
ENV=ray_kwargs.ray_init.runtime_env.env_vars

overrides=(
  # DelTA (examples/verl_delta.py): the plugin, its loss, its settings
  actor_rollout_ref.model.external_lib=verl_delta
  actor_rollout_ref.actor.policy_loss.loss_mode=delta
  "+$ENV.PYTHONPATH='$PYPATH'"                         # Ray wants strings: quoted for hydra
  "+$ENV.DELTA_K='1'" "+$ENV.DELTA_LAM_MIN='0.8'" "+$ENV.DELTA_LAM_MAX='1.2'" "+$ENV.DELTA_SCOPE='global'"
  trainer.use_v1=False                                  # the v0 driver: dense [B, T] per-token fields (tested)
  # advantage: GRPO (group mean and std), no KL anywhere, no entropy bonus, no dynamic sampling
  algorithm.adv_estimator=grpo algorithm.norm_adv_by_std_in_grpo=True algorithm.use_kl_in_reward=False
  actor_rollout_ref.actor.use_kl_loss=False actor_rollout_ref.actor.entropy_coeff=0
  # batch: 128 prompts x 16 responses per rollout batch, mini-batches of 32 prompts (4 optimizer steps), 2 epochs
  data.train_batch_size=128 actor_rollout_ref.rollout.n=16 actor_rollout_ref.actor.ppo_mini_batch_size=32
  actor_rollout_ref.actor.ppo_epochs=1 trainer.total_epochs=2
  # DAPO's loss: clip-higher 0.2 / 0.28, dual clip c = 10, token-mean over the mini-batch
  actor_rollout_ref.actor.clip_ratio_low=0.2 actor_rollout_ref.actor.clip_ratio_high=0.28
  actor_rollout_ref.actor.clip_ratio_c=10.0 actor_rollout_ref.actor.loss_agg_mode=token-mean
  # lengths and DAPO's soft overlong punishment (buffer 4,096, factor 1.0)
  data.max_prompt_length=2048 data.max_response_length=20480
  data.filter_overlong_prompts=True                    # longer prompts dropped when loaded, as delta.py drops them
  reward.reward_manager.name=dapo "+reward.reward_kwargs.max_resp_len=20480"
  "+reward.reward_kwargs.overlong_buffer_cfg.enable=True" "+reward.reward_kwargs.overlong_buffer_cfg.len=4096"
  "+reward.reward_kwargs.overlong_buffer_cfg.penalty_factor=1.0" "+reward.reward_kwargs.overlong_buffer_cfg.log=False"
  # AdamW lr 1e-6, no warm-up, weight decay 0.1, gradient clipping 1.0
  actor_rollout_ref.actor.optim.lr=1e-6 actor_rollout_ref.actor.optim.lr_warmup_steps=0
  actor_rollout_ref.actor.optim.weight_decay=0.1 actor_rollout_ref.actor.optim.clip_grad=1.0
  # rollouts: temperature 1, top-p 1, no top-k, vLLM
  actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.temperature=1.0
  actor_rollout_ref.rollout.top_p=1.0 actor_rollout_ref.rollout.top_k=-1
  # memory: FSDP2, gradient checkpointing, sequences packed by tokens (prompt + response = 22,528 fit one GPU)
  "+actor_rollout_ref.model.override_config.attn_implementation=sdpa"   # flash-attn is not installed by verl[vllm]
  actor_rollout_ref.actor.strategy=fsdp2 actor_rollout_ref.model.enable_gradient_checkpointing=True
  actor_rollout_ref.model.use_remove_padding=True
  actor_rollout_ref.actor.use_dynamic_bsz=True actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True
  actor_rollout_ref.actor.ppo_max_token_len_per_gpu=24576
  actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=24576
  # model, data, cluster
  "actor_rollout_ref.model.path=$MODEL" "data.train_files=$TRAIN" "data.val_files=$VAL"
  trainer.n_gpus_per_node=8 trainer.nnodes=1 trainer.project_name=delta trainer.experiment_name=qwen3-8b-delta
  trainer.save_freq=20 trainer.test_freq=20 "trainer.logger=[console]"   # verl's default adds wandb (a login)
)
if [[ "${1:-}" == "--print" ]]; then
  printf '%s\n' "${overrides[@]}"
  exit 0
fi
PYTHONPATH="$PYPATH" exec python -m verl.trainer.main_ppo "${overrides[@]}" "$@"
