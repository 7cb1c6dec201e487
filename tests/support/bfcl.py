"""bfcl-eval's own modules, loaded for the tests and benchmarks that compare promptgrid with it.

Not a test module. bfcl-eval is installed with ``--no-deps`` (its provider SDKs
are not needed to use it as a reference), so some of its modules cannot be
imported as they are: ``bfcl_eval.model_handler.utils`` imports tenacity and,
through bfcl-eval's Java and JavaScript parsers, tree-sitter; the AST checker
imports ``bfcl_eval.constants.model_config``, which imports every provider SDK.

``load_bfcl_modules`` executes such modules from their files under private
names, with minimal stand-ins for exactly those imports present in
``sys.modules`` only while they run. Afterwards ``sys.modules`` holds what it
held before, plus the ordinary bfcl-eval modules they imported on the way
(``bfcl_eval.utils``, its constants, ...), which need no stand-in; the loaded
modules themselves are never in it, so nothing else in the process sees a
stand-in. Nothing of bfcl-eval's is patched.

Tests import it as ``support.bfcl``; the benchmarks, which run as scripts, put
``tests/`` on ``sys.path`` first.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import tempfile
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_ABSENT = object()


class _Config:
    underscore_to_dot = False  # prompting models keep dots in function names


class _ConfigMapping(dict):  # type: ignore[type-arg]
    """``MODEL_CONFIG_MAPPING`` for any model name: the AST checker only reads ``underscore_to_dot``."""

    def __missing__(self, key: str) -> _Config:
        return _Config()


def _tree_sitter_needed(*_a: Any, **_k: Any) -> Any:
    raise NotImplementedError("stand-in: bfcl-eval's Java/JavaScript parsers need tree-sitter, not installed here")


def _no_retry(*_a: Any, **_k: Any) -> Any:
    return lambda f: f  # tenacity's decorators only retry provider calls, which the comparisons never make


def _stand_ins() -> dict[str, types.ModuleType]:
    """Fresh stand-ins for the imports a ``--no-deps`` install lacks (tenacity only when it is missing)."""
    attrs: dict[str, dict[str, Any]] = {
        "bfcl_eval.constants.model_config": {"MODEL_CONFIG_MAPPING": _ConfigMapping()},
        "bfcl_eval.model_handler.parser.java_parser": {"parse_java_function_call": _tree_sitter_needed},
        "bfcl_eval.model_handler.parser.js_parser": {"parse_javascript_function_call": _tree_sitter_needed},
    }
    if "tenacity" not in sys.modules and importlib.util.find_spec("tenacity") is None:
        attrs["tenacity"] = dict.fromkeys(
            ("retry", "retry_if_exception_message", "retry_if_exception_type", "wait_random_exponential"), _no_retry)
    stand_ins = {}
    for name, values in attrs.items():
        module = types.ModuleType(name)
        module.__dict__.update(values)
        stand_ins[name] = module
    return stand_ins


def load_bfcl_modules(*names: str) -> tuple[types.ModuleType, ...] | None:
    """The named bfcl-eval modules, executed privately with stand-ins; ``None`` when bfcl-eval is not installed.

    ``names`` are dotted names of modules inside bfcl-eval (for example
    ``"bfcl_eval.model_handler.utils"``); each is executed from its file, in
    the order given, as a new module named ``_promptgrid_`` plus the dotted
    name with underscores, and returned in that order. Import errors other than
    the stood-in ones propagate.
    """
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        return None
    base = Path(next(iter(spec.submodule_search_locations)))
    stand_ins = _stand_ins()
    saved = {name: sys.modules.get(name, _ABSENT) for name in stand_ins}
    sys.modules.update(stand_ins)
    try:
        return tuple(_execute(base, name) for name in names)
    finally:
        for name, old in saved.items():
            if old is _ABSENT:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old


def _execute(base: Path, name: str) -> types.ModuleType:
    package, *parts = name.split(".")
    if package != "bfcl_eval" or not parts:
        raise ValueError(f"not a module inside bfcl_eval: {name!r}")
    return _execute_file(base.joinpath(*parts).with_suffix(".py"), "_promptgrid_" + name.replace(".", "_"))


def _execute_file(path: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def prompting_handler_class() -> Any:
    """bfcl-eval's ``OpenAICompletionsHandler``, its files executed under private names with the stand-ins of
    ``support.bfcl`` (and ``overrides``' ``final`` when it is not installed) present only while they run."""
    loaded = load_bfcl_modules("bfcl_eval.model_handler.utils")
    if loaded is None:
        raise SystemExit("bfcl-eval is not installed (pip install --no-deps bfcl-eval)")
    spec = importlib.util.find_spec("bfcl_eval")
    assert spec is not None and spec.submodule_search_locations
    handlers = Path(next(iter(spec.submodule_search_locations))) / "model_handler"
    temporary: dict[str, types.ModuleType] = {"bfcl_eval.model_handler.utils": loaded[0]}
    if importlib.util.find_spec("overrides") is None:
        overrides = types.ModuleType("overrides")
        overrides.final = lambda f: f  # type: ignore[attr-defined]  # a marker only
        temporary["overrides"] = overrides
    names = (*temporary, "bfcl_eval.model_handler.base_handler")
    saved = {name: sys.modules.get(name, _ABSENT) for name in names}
    sys.modules.update(temporary)
    try:
        base = _execute_file(handlers / "base_handler.py", "_promptgrid_bfcl_eval_model_handler_base_handler")
        sys.modules["bfcl_eval.model_handler.base_handler"] = base
        module = _execute_file(handlers / "api_inference" / "openai_completion.py",
                               "_promptgrid_bfcl_eval_model_handler_api_inference_openai_completion")
    finally:
        for name, old in saved.items():
            if old is _ABSENT:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old
    return module.OpenAICompletionsHandler


@contextlib.contextmanager
def bfcl_environment() -> Iterator[None]:
    """A temporary ``BFCL_PROJECT_ROOT`` (bfcl-eval makes folders under it) and a dummy OpenAI key (its client
    is built, never used)."""
    names = ("BFCL_PROJECT_ROOT", "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_DEFAULT_HEADERS")
    old = {name: os.environ.get(name) for name in names}
    with tempfile.TemporaryDirectory(prefix="bfcl-root-") as root:
        os.environ["BFCL_PROJECT_ROOT"] = root
        os.environ["OPENAI_API_KEY"] = "offline-reference-key"
        os.environ.pop("OPENAI_BASE_URL", None)
        os.environ.pop("OPENAI_DEFAULT_HEADERS", None)
        try:
            yield
        finally:
            for name, value in old.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
