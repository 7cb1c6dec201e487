#!/usr/bin/env bash
# Lint and type checks, as CI runs them (.ci/run, before the tests).
#
#   bash scripts/lint.sh          # ruff check over the tree, mypy over the whole library
#
# ruff: the rule set is in pyproject.toml ([tool.ruff.lint]).
# mypy: the whole library -- every module of the installed `promptgrid` package, settings in
# [tool.mypy] in pyproject.toml (tests and scripts are not checked). The package is assembled
# from five top-level folders (pyproject's package-dir), which mypy cannot follow through the
# editable install's import hook; so it reads a tree of links laid out as the installed
# package is (.mypy-src/promptgrid/{matrix,templates,translate,variants}).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PY:-.venv/bin/python}"

"$PY" -m ruff check --quiet .

tree=.mypy-src/promptgrid
rm -rf .mypy-src
mkdir -p "$tree"
for f in promptgrid/*.py promptgrid/py.typed; do
    [ -e "$f" ] && ln -s "$PWD/$f" "$tree/$(basename "$f")"
done
for sub in matrix templates translate variants; do
    ln -s "$PWD/$sub" "$tree/$sub"
done
"$PY" -m mypy
