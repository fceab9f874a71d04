#!/usr/bin/env bash
# CI for DelTA inside TRL (examples/trl_delta.py): its own venv from requirements-trl.txt (TRL pulls accelerate,
# which requirements.txt leaves out), then test_trl.py on the tiny model and, when DELTA_REAL_MODEL names a folder
# (.ci/real.sh makes it), on SmolLM2-135M-Instruct; also the --report_to tensorboard test (tensorboard is installed
# here too). The venv (TRL_VENV, default $TMPDIR/delta-trl-venv) is reused.
set -euo pipefail
cd "$(dirname "$0")/.."
source .ci/venv.sh
make_venv "${TRL_VENV:-${TMPDIR:-/tmp}/delta-trl-venv}" requirements-trl.txt
echo "TRL venv ($VENV): ready in ${SECONDS} s"
export DELTA_REAL_MODEL="${DELTA_REAL_MODEL:-${TMPDIR:-/tmp}/delta-smollm2}"
[ -f "$DELTA_REAL_MODEL/config.json" ] || unset DELTA_REAL_MODEL
"$VENV/bin/python" -m pytest -q -m "trl or tensorboard" test_trl.py test_engines.py  # conftest.py's markers
