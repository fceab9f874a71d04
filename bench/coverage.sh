#!/usr/bin/env bash
# Line and branch coverage (both sides of every condition) of delta.py, checkpoints.py, engines.py and eval.py over
# the suites CI runs (.ci/run), every process included:
# pytest's, the torchrun ranks and mp.spawn workers the tests start (coverage's patch = subprocess), then the
# lines no suite executes. CI does not run this; docs/scale.md lists those lines, each with its reason.
#
#   bash bench/coverage.sh                 # the main suite and the slow job (system python), about 30 minutes
#   bash bench/coverage.sh main slow real trl vllm verl   # also the jobs of their own venvs (.ci/*.sh, built first)
#
# Each job runs in the python CI gives it (the venvs of .ci/real.sh, trl.sh, vllm.sh and verl.sh at their default
# places, or REAL_VENV, TRL_VENV, VLLM_VENV, VERL_VENV); coverage 7.17.5 is installed into each. The data and the
# report go to runs/coverage/ (report.txt: statements, missed, branches, partial branches, the missing lines and
# branch arcs; <job>.log: each job's pytest output).
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=("$@")
[ ${#JOBS[@]} -gt 0 ] || JOBS=(main slow)
OUT="$PWD/runs/coverage"
rm -rf "$OUT" && mkdir -p "$OUT"
cat > "$OUT/coveragerc" <<EOF
[run]
branch = true
data_file = $OUT/.coverage
parallel = true
patch = subprocess
include = $PWD/delta.py, $PWD/checkpoints.py, $PWD/engines.py, $PWD/eval.py
[report]
show_missing = true
include = $PWD/delta.py, $PWD/checkpoints.py, $PWD/engines.py, $PWD/eval.py
EOF
export COVERAGE_RCFILE="$OUT/coveragerc"
TMP="${TMPDIR:-/tmp}"
export DELTA_REAL_MODEL="${DELTA_REAL_MODEL:-$TMP/delta-smollm2}"  # .ci/real.sh made it; trl and verl use it too
[ -f "$DELTA_REAL_MODEL/config.json" ] || unset DELTA_REAL_MODEL
python_of() {  # the interpreter CI runs a job's tests with
  case $1 in
    main|slow) echo python ;;
    real) echo "${REAL_VENV:-$TMP/delta-real-venv}/bin/python" ;;
    trl) echo "${TRL_VENV:-$TMP/delta-trl-venv}/bin/python" ;;
    vllm) echo "${VLLM_VENV:-$TMP/delta-vllm-venv}/bin/python" ;;
    verl) echo "${VERL_VENV:-$TMP/delta-verl-venv}/bin/python" ;;
  esac
}
for job in "${JOBS[@]}"; do
  PY=$(python_of "$job")
  [ -x "$(command -v "$PY")" ] || { echo "$job: no venv at $PY (run .ci/$job.sh once first)"; exit 2; }
  "$PY" -m pip install -q coverage==7.17.5
  SECONDS=0
  case $job in  # the commands of .ci/run and .ci/*.sh
    main) "$PY" -m coverage run -m pytest -q ;;
    slow) "$PY" -m coverage run -m pytest -q -m slow ;;
    real) "$PY" -m coverage run -m pytest -q test_real.py ;;
    trl) "$PY" -m coverage run -m pytest -q -m "trl or tensorboard" test_trl.py test_engines.py ;;
    vllm) "$PY" -m coverage run -m pytest -q -m vllm ;;
    verl) OMP_NUM_THREADS=1 "$PY" -m coverage run -m pytest -q test_verl.py ;;
  esac > "$OUT/$job.log" 2>&1 || true
  tail -3 "$OUT/$job.log"
  echo "$job: ${SECONDS} s"
done
python -m coverage combine -q
python -m coverage report | tee "$OUT/report.txt"
