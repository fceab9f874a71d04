#!/usr/bin/env bash
# CI for DelTA in verl (examples/verl_delta.py): its own venv from requirements-verl.txt (verl 0.9.1 caps
# transformers below 5.11 and pulls Ray, so not the main environment), then test_verl.py on the tiny model and, where
# DELTA_REAL_MODEL names a folder (.ci/real.sh makes it), on SmolLM2-135M-Instruct. The venv lives outside the
# repository (VERL_VENV, default $TMPDIR/delta-verl-venv) and is reused when it exists.
set -euo pipefail
cd "$(dirname "$0")/.."
source .ci/venv.sh
make_venv "${VERL_VENV:-${TMPDIR:-/tmp}/delta-verl-venv}" requirements-verl.txt
echo "verl venv ($VENV): ready in ${SECONDS} s"
export DELTA_REAL_MODEL="${DELTA_REAL_MODEL:-${TMPDIR:-/tmp}/delta-smollm2}"  # .ci/real.sh made it: the equality
[ -f "$DELTA_REAL_MODEL/config.json" ] || unset DELTA_REAL_MODEL  # tests run on SmolLM2-135M-Instruct too
OMP_NUM_THREADS=1 "$VENV/bin/python" -m pytest -q test_verl.py
