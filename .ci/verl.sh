#!/usr/bin/env bash
# CI for DelTA in verl (examples/verl_delta.py): its own venv from requirements-verl.txt (verl 0.9.1 caps
# transformers below 5.11 and pulls Ray, so not the main environment), then test_verl.py. The venv lives outside
# the repository (VERL_VENV, default $TMPDIR/delta-verl-venv) and is reused when it exists.
set -euo pipefail
cd "$(dirname "$0")/.."
source .ci/venv.sh
make_venv "${VERL_VENV:-${TMPDIR:-/tmp}/delta-verl-venv}" requirements-verl.txt
echo "verl venv ($VENV): ready in ${SECONDS} s"
OMP_NUM_THREADS=1 "$VENV/bin/python" -m pytest -q test_verl.py
