#!/usr/bin/env bash
# CI: the documented commands for the offline model and its recipe, as a new user runs them: a new venv
# holding only what requirements.txt installs, then test_docs.py with that venv's python, which runs the README's
# path 2, docs/real-model.md's and tools/smollm2.py's commands verbatim (the recipe's run cut to one step).
set -euo pipefail
cd "$(dirname "$0")/.."
FRESH="$(mktemp -d)/venv"
SECONDS=0
python -m venv "$FRESH"
"$FRESH/bin/python" -m pip install -q -r requirements.txt
echo "fresh venv ($FRESH) from requirements.txt: ${SECONDS} s"
PATH="$FRESH/bin:$PATH" DELTA_DOC_COMMANDS=1 "$FRESH/bin/python" -m pytest -q -s test_docs.py
rm -rf "$(dirname "$FRESH")"
