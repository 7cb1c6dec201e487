"""bfcl-eval's decoder, loaded for comparison, and helpers to compare with it.

``bfcl_eval.model_handler.utils`` imports tree-sitter parsers (Java/JS) and
tenacity, which a ``--no-deps`` install lacks. The file is loaded here under a
private name with those imports stubbed only while it executes
(``support.bfcl``); nothing is left stubbed in ``sys.modules``
afterwards. Tests that need it skip cleanly when bfcl-eval is not installed.

Safety: bfcl-eval ``eval()``s arithmetic in Python-format values. ``bfcl_safe``
refuses to hand it any text whose AST holds arithmetic that is not small
literal arithmetic, a lambda, or anything else it would evaluate.
"""

from __future__ import annotations

import ast
import math
import re
import types
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from promptgrid.matrix.scoring.parse import BFCL_DECODER_FAILED, BFCL_WRONG_OUTPUT_FORMAT, ParseResult, parse_response
from support.bfcl import load_bfcl_modules

Outcome = tuple[str, Any]  # ("raise", message) | ("wrong_format", value) | ("ok", calls)


def _load_bfcl() -> types.SimpleNamespace | None:
    try:
        import bfcl_eval  # noqa: F401
        from bfcl_eval.constants.enums import ReturnFormat
    except ImportError:
        return None
    (module,) = load_bfcl_modules("bfcl_eval.model_handler.utils")
    from bfcl_eval.utils import is_function_calling_format_output

    return types.SimpleNamespace(
        decode=module.default_decode_ast_prompting,
        ReturnFormat=ReturnFormat,
        is_format=is_function_calling_format_output,
    )


_BFCL = _load_bfcl()
_MAX_SAFE_POW = 64


def bfcl_safe(text: str, return_format: str, tool_call_tag: bool) -> bool:
    """Whether bfcl-eval may be handed ``text`` without evaluating anything risky.

    Repeats bfcl-eval's pre-processing to get the exact string it would
    ``ast.parse``, parses it here (safe) and inspects the tree.
    """
    if return_format != "python":
        return True
    s = text.strip("`\n ")
    s = s if s.startswith("[") else "[" + s
    s = s if s.endswith("]") else s + "]"
    if tool_call_tag:
        m = re.search(r"<TOOLCALL>(.*?)</TOOLCALL>", s, re.DOTALL)
        if m is None:
            return True  # bfcl-eval raises before parsing
        s = m.group(1).strip()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(s.strip().strip("'"), mode="eval")
    except Exception:  # noqa: BLE001 -- bfcl-eval fails the same way, before any eval
        return True
    return _tree_safe(tree)


def _tree_safe(tree: ast.AST) -> bool:
    """No lambda; every arithmetic sub-tree small literal arithmetic (no str repetition)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Lambda):
            return False
        if not isinstance(node, ast.BinOp):
            continue
        for sub in ast.walk(node):
            if isinstance(sub, (ast.operator, ast.unaryop, ast.expr_context)):
                continue
            if isinstance(sub, ast.BinOp):
                if not isinstance(sub.op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)):
                    return False
                exponent = sub.right.operand if isinstance(sub.right, ast.UnaryOp) else sub.right
                if isinstance(sub.op, ast.Pow) and not (
                    isinstance(exponent, ast.Constant) and type(exponent.value) in (int, float)
                    and abs(exponent.value) <= _MAX_SAFE_POW
                ):
                    return False
                continue
            if isinstance(sub, ast.UnaryOp) and isinstance(sub.op, (ast.USub, ast.UAdd)):
                continue
            if isinstance(sub, ast.Constant) and type(sub.value) in (int, float):
                if abs(sub.value) > 10**6:
                    return False
                continue
            if isinstance(sub, ast.Constant) and type(sub.value) is str and len(sub.value) < 1000:
                if any(isinstance(o, ast.BinOp) and not isinstance(o.op, ast.Add) for o in ast.walk(node)):
                    return False
                continue
            return False
    return True


def bfcl_outcome(text: str, return_format: str, tool_call_tag: bool) -> Outcome:
    """What bfcl-eval's decode stage does with ``text``."""
    assert _BFCL is not None
    if not bfcl_safe(text, return_format, tool_call_tag):
        raise AssertionError(f"refusing to hand bfcl-eval an unsafe text: {text!r}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = _BFCL.decode(text, _BFCL.ReturnFormat(return_format), tool_call_tag)
    except Exception as exc:  # noqa: BLE001 -- bfcl-eval's runner catches everything too
        return ("raise", f"{type(exc).__name__}: {exc}")
    if not _BFCL.is_format(value):
        return ("wrong_format", value)
    return ("ok", value)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def agreement(result: ParseResult, outcome: Outcome) -> str | None:
    """None when our result says what bfcl-eval does; else what differs."""
    kind, value = outcome
    if result.failure is None:
        if kind != "ok":
            return f"we parse {result.calls!r}; bfcl-eval: {kind} {value!r}"
        if not _same(list(result.calls or ()), value):
            return f"we parse {result.calls!r}; bfcl-eval {value!r}"
        return None
    expected = result.bfcl_error_type
    if expected == BFCL_DECODER_FAILED:
        return None if kind == "raise" else f"we say bfcl-eval raises ({result.failure}); it gives {kind} {value!r}"
    if expected == BFCL_WRONG_OUTPUT_FORMAT:
        return None if kind == "wrong_format" else f"we say wrong format; bfcl-eval gives {kind} {value!r}"
    if kind == "ok" and value == []:
        return None
    return f"we say bfcl-eval decodes [] ({result.failure}); it gives {kind} {value!r}"


@pytest.fixture(scope="session")
def bfcl() -> Callable[[str, str, bool], Outcome]:
    """bfcl-eval's decode outcome for (text, return_format, tool_call_tag)."""
    if _BFCL is None:
        pytest.skip("bfcl-eval is not installed")
    return bfcl_outcome


@pytest.fixture(scope="session")
def bfcl_is_safe() -> Callable[[str, str, bool], bool]:
    """Whether a text may be handed to bfcl-eval (see ``bfcl_safe``)."""
    return bfcl_safe


@pytest.fixture(scope="session")
def check_bfcl(bfcl: Callable[[str, str, bool], Outcome]) -> Callable[..., ParseResult]:
    """Parse with ours and bfcl-eval; fail the test when they disagree without a documented deviation."""

    def check(text: str, return_format: str, tool_call_tag: bool) -> ParseResult:
        result = parse_response(text, return_format, tool_call_tag)
        outcome = bfcl(text, return_format, tool_call_tag)
        if result.bfcl_deviation is None:
            problem = agreement(result, outcome)
            assert problem is None, f"{problem}\n  text={text!r} format={return_format} tag={tool_call_tag}"
        return result

    return check


@pytest.fixture(scope="session")
def bfcl_unguarded_decode() -> Callable[[str, str, bool], Any]:
    """bfcl-eval's decoder WITHOUT the safety guard: only for texts whose effect is harmless."""
    if _BFCL is None:
        pytest.skip("bfcl-eval is not installed")

    def decode(text: str, return_format: str, tool_call_tag: bool) -> Any:
        return _BFCL.decode(text, _BFCL.ReturnFormat(return_format), tool_call_tag)

    return decode
