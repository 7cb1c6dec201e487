"""``promptgrid._astparse.parse``: ast.parse, tried again on CPython 3.11's spurious depth-mismatch SystemError."""

from __future__ import annotations

import ast
from typing import Any

import pytest

from promptgrid import _astparse


def _flaky(fails: int, message: str) -> Any:
    real = ast.parse
    calls = {"n": 0}

    def parse(*args: Any, **kwargs: Any) -> ast.AST:
        calls["n"] += 1
        if calls["n"] <= fails:
            raise SystemError(message)
        return real(*args, **kwargs)

    return parse, calls


def test_the_depth_mismatch_is_tried_again_and_the_parse_succeeds(monkeypatch: pytest.MonkeyPatch) -> None:
    parse, calls = _flaky(2, "AST constructor recursion depth mismatch (before=201, after=248)")
    monkeypatch.setattr(_astparse.ast, "parse", parse)
    tree = _astparse.parse("f(a=1)", mode="eval")
    assert isinstance(tree, ast.Expression) and calls["n"] == 3


def test_other_errors_and_a_mismatch_that_persists_are_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    parse, calls = _flaky(1, "something else")
    monkeypatch.setattr(_astparse.ast, "parse", parse)
    with pytest.raises(SystemError, match="something else"):
        _astparse.parse("x")
    assert calls["n"] == 1
    parse, calls = _flaky(99, "AST constructor recursion depth mismatch (before=1, after=2)")
    monkeypatch.setattr(_astparse.ast, "parse", parse)
    with pytest.raises(SystemError, match="depth mismatch"):
        _astparse.parse("x")
    assert calls["n"] == _astparse._TRIES
    monkeypatch.undo()
    with pytest.raises(SyntaxError):
        _astparse.parse("f(")
