"""The ``ast`` path for Python-syntax calls: bfcl-eval's value rules, without eval.

bfcl-eval parses the response with ``ast.parse`` and turns each node into a
value (``resolve_ast_by_type``): constants as is, ``-x`` negated, names as
their identifier string, calls with keywords as nested calls, calls without
keywords and subscripts as their source text, lists/tuples/dicts recursively,
and ``a + b`` by evaluating ``ast.unparse(node)`` with Python's eval, which runs arbitrary code from
the model on the evaluating machine. Here ``a + b`` is folded only when it is
bounded arithmetic on int/float literals (or ``str + str``); anything else is
``UNSAFE_EXPRESSION``. Every other rule follows bfcl-eval, so values match.

``literal_value`` is the safe ``ast.literal_eval`` used for XML array/dict
values (bfcl-eval calls ``ast.literal_eval`` there, which is safe from code
execution but not from deep nesting; the token bound and depth checks are).
"""

from __future__ import annotations

import ast
import operator
import re
import warnings
from collections.abc import Callable
from typing import Any

from promptgrid._astparse import parse

from ._fail import Fail
from ._limits import MAX_ARITH_OPERANDS, MAX_DEPTH, MAX_INT_BITS
from ._pyfast import Decline, TooDeep, TooLarge, parse_literal_fast
from ._result import BFCL_DECODER_FAILED, Deviation, ParseFailure

__all__ = ["POSITIONAL", "literal_value", "parse_calls_ast", "syntax_failure"]

POSITIONAL = "*"
"""With ``positional=True``: the key of a call's positional arguments (a tuple) among its keyword arguments. No
Python keyword can be ``*``, so it never collides with one."""

_ARITH: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_NUMBER_TYPES = (int, float, complex, bool)
_NUMBER_THEN_NAME_RE = re.compile(r"[0-9][^\W\d]")


def _parse(text: str, mode: str = "eval") -> ast.AST:
    # Invalid escapes ("\d") are a DeprecationWarning in 3.11, an error under -W error:
    # bfcl-eval runs with warnings ignored, so we do too, to get the same value.
    # The parser warns only on a backslash in a literal or a number run into a
    # name ("0in"); without either, skip catch_warnings (it costs as much as a
    # small parse).
    if "\\" not in text and _NUMBER_THEN_NAME_RE.search(text) is None:
        return parse(text, mode=mode)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return parse(text, mode=mode)


def syntax_failure(exc: SyntaxError, text: str) -> Fail:
    """Classify a SyntaxError from ``ast.parse`` into a failure kind."""
    msg = exc.msg or str(exc)
    if "too many nested parentheses" in msg:
        return Fail(ParseFailure.TOO_DEEP, f"Python: {msg}")
    if ("was never closed" in msg or "unexpected EOF" in msg or "unterminated" in msg
            or "does not match opening parenthesis" in msg):
        kind = ParseFailure.UNCLOSED_BRACKET
    elif "line continuation character" in msg and ('\\"' in text or "\\'" in text):
        kind = ParseFailure.BAD_ESCAPING
    else:
        kind = ParseFailure.BAD_SYNTAX
    where = f" (line {exc.lineno}, column {exc.offset})" if exc.lineno else ""
    return Fail(kind, f"Python syntax error: {msg}{where}")


def parse_calls_ast(text: str, *, positional: bool = False
                    ) -> tuple[list[dict[str, dict[str, Any]]], Deviation | None]:
    """bfcl-eval's ``ast_parse`` for Python, with eval replaced by safe folding.

    Returns the calls and the deviation from bfcl-eval met on the way (``+x``).
    bfcl-eval drops positional arguments (``sort('a.pdf')`` is ``sort()``);
    ``positional=True`` (conversations only: their environment binds them as
    Python does) keeps a call's positional arguments, resolved by the same
    value rules, as a tuple under the key ``POSITIONAL`` of its arguments.
    """
    try:
        tree = _parse(text)
    except SyntaxError as exc:
        raise syntax_failure(exc, text) from None
    except (RecursionError, MemoryError):
        raise Fail(ParseFailure.TOO_DEEP, "Python: expression nested too deeply to parse") from None
    except (ValueError, TypeError) as exc:  # null bytes, lone surrogates
        raise Fail(ParseFailure.BAD_SYNTAX, f"Python: {exc}") from None
    body = tree.body  # type: ignore[attr-defined]
    nodes: list[ast.expr]
    if isinstance(body, ast.Call):
        nodes = [body]
    elif isinstance(body, (ast.List, ast.Tuple, ast.Set)):
        nodes = body.elts
    else:
        raise Fail(ParseFailure.NOT_A_CALL, f"Python: expected a list of calls, got {_what(body)}")
    resolver = _Resolver(positional)
    calls = []
    try:
        for node in nodes:
            if not isinstance(node, ast.Call):
                raise Fail(ParseFailure.NOT_A_CALL, f"Python: list item is {_what(node)}, not a call")
            calls.append(resolver.call(node, 1))
    except RecursionError:
        raise Fail(ParseFailure.TOO_DEEP, "Python: value nested too deeply") from None
    return calls, resolver.deviation


def _what(node: ast.AST) -> str:
    return type(node).__name__.lower()


class _Resolver:
    """bfcl-eval's ``resolve_ast_call`` / ``resolve_ast_by_type``, made safe."""

    __slots__ = ("deviation", "positional")

    def __init__(self, positional: bool = False) -> None:
        self.deviation: Deviation | None = None
        self.positional = positional

    def call(self, node: ast.Call, depth: int) -> dict[str, dict[str, Any]]:
        parts = []
        func: ast.AST = node.func
        while isinstance(func, ast.Attribute):
            parts.append(func.attr)
            func = func.value
        if isinstance(func, ast.Name):
            parts.append(func.id)
        name = ".".join(reversed(parts))
        args: dict[str, Any] = {}
        unpack = False
        for kw in node.keywords:
            value = self.value(kw.value, depth + 1)
            if kw.arg is None:
                unpack = True
            else:
                args[kw.arg] = value
        if unpack:
            raise Fail(
                ParseFailure.NOT_A_CALL,
                f"Python: {name}(**...) unpacks arguments; no parameter names to score",
                bfcl_error_type=None,
                deviation=Deviation.KWARGS_UNPACK,
            )
        if self.positional and depth == 1 and node.args:  # a call of the answer, not a call inside a value
            if any(isinstance(arg, ast.Starred) for arg in node.args):
                raise Fail(ParseFailure.NOT_A_CALL, f"Python: {name}(*...) unpacks arguments; no values to bind",
                           bfcl_error_type=None)
            args[POSITIONAL] = tuple(self.value(arg, depth + 1) for arg in node.args)
        return {name: args}

    def value(self, node: ast.AST, depth: int) -> Any:
        """A value node resolved by bfcl-eval's rule for its node type (``_VALUE_RULES``)."""
        if depth > MAX_DEPTH:
            raise Fail(ParseFailure.TOO_DEEP, f"Python: value nested deeper than {MAX_DEPTH}",
                       deviation=Deviation.LIMITS)
        rule = _VALUE_RULES.get(type(node))
        if rule is None:
            raise Fail(ParseFailure.BAD_VALUE, f"Python: unsupported value ({_what(node)})")
        return rule(self, node, depth)

    def mapping(self, node: ast.Dict, depth: int) -> dict[Any, Any]:
        """A dict display, its keys and values resolved; ``**mapping`` and unhashable keys refused."""
        out = {}
        for k, v in zip(node.keys, node.values, strict=True):
            if k is None:
                raise Fail(ParseFailure.BAD_VALUE, "Python: **mapping inside a dict value")
            key = self.value(k, depth + 1)
            try:
                out[key] = self.value(v, depth + 1)
            except TypeError:
                raise Fail(ParseFailure.BAD_VALUE, f"Python: unhashable dict key {key!r}") from None
        return out

    def nested_call(self, node: ast.Call, depth: int) -> Any:
        """A call as a value: a nested call when it has keywords, else its source text (as bfcl-eval keeps it)."""
        if not node.keywords:
            return ast.unparse(node)
        return self.call(node, depth + 1)

    def unary(self, node: ast.UnaryOp) -> Any:
        """bfcl-eval negates the operand's literal whatever the operator.

        ``-5`` matches; ``+5`` is 5 here (bfcl-eval: -5); ``not 1`` and ``~1``
        are refused (bfcl-eval: -1), both recorded as a deviation.
        """
        operand = node.operand
        if not isinstance(operand, ast.Constant) or not isinstance(operand.value, _NUMBER_TYPES):
            raise Fail(ParseFailure.BAD_VALUE, "Python: unary operator on something other than a number")
        value = operand.value
        if isinstance(node.op, ast.USub):
            return -value
        if isinstance(node.op, ast.UAdd):
            if value != 0:
                self.deviation = Deviation.UNARY_OP
            return +value
        raise Fail(
            ParseFailure.BAD_VALUE,
            f"Python: '{type(node.op).__name__.lower()}' on a literal is not a value",
            bfcl_error_type=None,
            deviation=Deviation.UNARY_OP,
        )


def _lambda(resolver: _Resolver, node: ast.Lambda, depth: int) -> Any:
    """A lambda is refused: code, not a value."""
    raise Fail(ParseFailure.UNSAFE_EXPRESSION, "Python: lambda as a value")


# bfcl-eval's value rule for each node type ``ast.parse`` gives (``resolve_ast_by_type``); other types are refused.
_VALUE_RULES: dict[type, Callable[[_Resolver, Any, int], Any]] = {
    ast.Constant: lambda r, node, depth: "..." if node.value is Ellipsis else node.value,
    ast.Name: lambda r, node, depth: node.id,
    ast.List: lambda r, node, depth: [r.value(v, depth + 1) for v in node.elts],
    ast.Tuple: lambda r, node, depth: tuple(r.value(v, depth + 1) for v in node.elts),
    ast.Dict: _Resolver.mapping,
    ast.Call: _Resolver.nested_call,
    ast.UnaryOp: lambda r, node, depth: r.unary(node),
    ast.BinOp: lambda r, node, depth: _fold(node),
    ast.Subscript: lambda r, node, depth: ast.unparse(node.value) + "[" + ast.unparse(node.slice) + "]",
    ast.Lambda: _lambda,
}


def _fold(node: ast.BinOp) -> Any:
    """Evaluate bounded arithmetic on literals; refuse everything else."""
    budget = [MAX_ARITH_OPERANDS]

    def ev(n: ast.AST, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise Fail(ParseFailure.TOO_DEEP, "Python: arithmetic nested too deeply",
                       deviation=Deviation.LIMITS)
        if isinstance(n, ast.Constant) and type(n.value) in (int, float, str):
            budget[0] -= 1
            if budget[0] < 0:
                raise Fail(ParseFailure.UNSAFE_EXPRESSION,
                           f"Python: arithmetic with more than {MAX_ARITH_OPERANDS} operands",
                           deviation=Deviation.ARITH_BOUNDS)
            return n.value
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.USub, ast.UAdd)):
            v = ev(n.operand, depth + 1)
            if isinstance(v, str):
                raise Fail(ParseFailure.BAD_VALUE, "Python: unary operator on a string")
            return -v if isinstance(n.op, ast.USub) else +v
        if isinstance(n, ast.BinOp) and type(n.op) in _ARITH:
            return _apply(n.op, ev(n.left, depth + 1), ev(n.right, depth + 1))
        raise Fail(
            ParseFailure.UNSAFE_EXPRESSION,
            f"Python: expression with {_what(n)} is not evaluated (bfcl-eval would evaluate it)",
            deviation=Deviation.EVAL_REFUSED,
        )

    return ev(node, 0)


def _apply(op: ast.operator, a: Any, b: Any) -> Any:
    sa, sb = isinstance(a, str), isinstance(b, str)
    if sa or sb:
        if isinstance(op, ast.Add) and sa and sb:
            return a + b
        if isinstance(op, (ast.Mult, ast.Mod)) and sa:
            # "x" * n builds strings of any size; "x" % y is formatting: not arithmetic.
            raise Fail(ParseFailure.UNSAFE_EXPRESSION, "Python: string repetition/formatting",
                       deviation=Deviation.EVAL_REFUSED)
        if isinstance(op, ast.Mult) and sb:
            raise Fail(ParseFailure.UNSAFE_EXPRESSION, "Python: string repetition",
                       deviation=Deviation.EVAL_REFUSED)
        raise Fail(ParseFailure.BAD_VALUE, "Python: arithmetic mixing strings and numbers")
    if isinstance(a, int) and isinstance(b, int):
        if isinstance(op, ast.Mult) and a.bit_length() + b.bit_length() > MAX_INT_BITS:
            raise _too_big()
        if isinstance(op, ast.Pow) and b > 0 and abs(a) > 1 and a.bit_length() * b > MAX_INT_BITS:
            raise _too_big()
    try:
        result = _ARITH[type(op)](a, b)
    except (ArithmeticError, ValueError, TypeError) as exc:
        raise Fail(ParseFailure.BAD_VALUE, f"Python: arithmetic error ({exc})") from None
    if isinstance(result, int) and result.bit_length() > MAX_INT_BITS:
        raise _too_big()
    return result


def _too_big() -> Fail:
    return Fail(ParseFailure.UNSAFE_EXPRESSION,
                f"Python: integer arithmetic beyond {MAX_INT_BITS} bits is not evaluated",
                deviation=Deviation.ARITH_BOUNDS)


def literal_value(text: str) -> Any:
    """``ast.literal_eval(text)`` with bounds; raises :class:`Fail` (BAD_VALUE, TOO_*)."""
    try:
        return parse_literal_fast(text)
    except Decline:
        pass
    except TooLarge:
        raise Fail(ParseFailure.TOO_LARGE, "literal value has too many tokens",
                   deviation=Deviation.LIMITS) from None
    except TooDeep:
        raise Fail(ParseFailure.TOO_DEEP, "literal value nested too deeply",
                   deviation=Deviation.LIMITS) from None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
        msg = getattr(exc, "msg", None) or str(exc) or type(exc).__name__
        raise Fail(ParseFailure.BAD_VALUE, f"not a literal: {msg}", bfcl_error_type=BFCL_DECODER_FAILED) from None
