#!/usr/bin/env bash
# Sourced by .ci/vllm.sh and .ci/verl.sh: make_venv DIR REQUIREMENTS builds (or reuses) a venv outside the
# repository with torch 2.13.0 first, alone (the CPU wheel on this machine's disk, never a CUDA build), then the
# requirements file, and says how long it took. The venv's python is then at $VENV/bin/python.
make_venv() {
  VENV=$1
  SECONDS=0
  [ -x "$VENV/bin/python" ] || python -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q torch==2.13.0
  "$VENV/bin/python" -m pip install -q -r "$2"
}
