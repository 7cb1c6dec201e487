"""Python return format: bfcl-eval's decoding rules, with and without <TOOLCALL>."""

from __future__ import annotations

import ast
from typing import Any

import pytest

from promptgrid.matrix.scoring.parse import Deviation, ParseFailure, parse_response
from promptgrid.matrix.scoring.parse._pyast import parse_calls_ast
from promptgrid.matrix.scoring.parse._pyfast import (
    Decline,
    parse_calls_fast,
    parse_literal_fast,
    starts_with_prose,
    tokenize,
)

OK = None  # expected failure: none

# (text, tag, expected failure kind, expected calls or ... when not checked)
CASES = [
    ("[f(a=1)]", False, OK, ({"f": {"a": 1}},)),
    ("f(a=1)", False, OK, ({"f": {"a": 1}},)),  # bfcl-eval adds the brackets
    ("[f(a=1), g.h(b='x')]", False, OK, ({"f": {"a": 1}}, {"g.h": {"b": "x"}})),
    ("[f()]", False, OK, ({"f": {}},)),
    ("[]", False, OK, ()),
    ("", False, ParseFailure.EMPTY, ...),
    ("  \n ", False, ParseFailure.EMPTY, ...),
    ("[f(a=1,)]", False, OK, ({"f": {"a": 1}},)),
    ("[f(a=1, b=2.5, c=-3, d=True, e=None, f='s', g=\"d\")]", False, OK,
     ({"f": {"a": 1, "b": 2.5, "c": -3, "d": True, "e": None, "f": "s", "g": "d"}},)),
    ("[f(a=[1, [2]], b={'k': (1, 2)}, c=(1,), d=(1), e=())]", False, OK,
     ({"f": {"a": [1, [2]], "b": {"k": (1, 2)}, "c": (1,), "d": 1, "e": ()}},)),
    ("[f(unit=celsius, flag=true)]", False, OK, ({"f": {"unit": "celsius", "flag": "true"}},)),
    ("[f(a=g(b=1))]", False, OK, ({"f": {"a": {"g": {"b": 1}}}},)),
    ("[f(a=g(), b=m.n(), c=g(1, 'x'))]", False, OK, ({"f": {"a": "g()", "b": "m.n()", "c": "g(1, 'x')"}},)),
    ("[f(a=x[1:2], b=y[0])]", False, OK, ({"f": {"a": "x[1:2]", "b": "y[0]"}},)),
    ("[f(a=...)]", False, OK, ({"f": {"a": "..."}},)),
    ("[f(1, 2)]", False, OK, ({"f": {}},)),  # bfcl-eval ignores positional arguments
    ("[f(a='line\\nbreak', b='it\\'s', c='\\d', d='\\x41\\u00e9')]", False, OK,
     ({"f": {"a": "line\nbreak", "b": "it's", "c": "\\d", "d": "Aé"}},)),
    ("[f(a=2**3, b=1/3, c=7//2, d=7%3, e=2*-3, f=2**-1, g=1.5+1)]", False, OK,
     ({"f": {"a": 8, "b": 1 / 3, "c": 3, "d": 1, "e": -6, "f": 0.5, "g": 2.5}},)),
    ("[f(a='ab' + 'cd')]", False, OK, ({"f": {"a": "abcd"}},)),
    ("'[f(a=1)]'", False, ParseFailure.NOT_A_CALL, ...),  # a list holding a string
    ("<TOOLCALL>'[f(a=1)]'</TOOLCALL>", True, OK, ({"f": {"a": 1}},)),  # inside the tag, quotes are stripped
    ("```\n[f(a=1)]\n```", False, OK, ({"f": {"a": 1}},)),  # bare fences stripped at the ends
    ("{f(a=1)}", True, ParseFailure.TAG_MISSING, ...),
    # with the tag
    ("<TOOLCALL>[f(a=1)]</TOOLCALL>", True, OK, ({"f": {"a": 1}},)),
    ("<TOOLCALL>f(a=1), g(b=2)</TOOLCALL>", True, OK, ({"f": {"a": 1}}, {"g": {"b": 2}})),
    ("<TOOLCALL>{f(a=1)}</TOOLCALL>", True, OK, ({"f": {"a": 1}},)),
    ("Thinking... <TOOLCALL>[f(a=1)]</TOOLCALL> done", True, OK, ({"f": {"a": 1}},)),
    ("<TOOLCALL></TOOLCALL>", True, ParseFailure.EMPTY, ...),
    ("[f(a=1)]", True, ParseFailure.TAG_MISSING, ...),
    ("<TOOLCALL>[f(a=1)]", True, ParseFailure.UNCLOSED_TAG, ...),
    ("<toolcall>[f(a=1)]</toolcall>", True, ParseFailure.TAG_MISSING, ...),
    ("<TOOLCALL>  ' [f(a=1)]'</TOOLCALL>", True, ParseFailure.BAD_SYNTAX, ...),  # indent after quote strip
    # failures
    ("Sure! [f(a=1)]", False, ParseFailure.EXTRA_TEXT, ...),
    ("[f(a=1)]\nHope this helps!", False, ParseFailure.EXTRA_TEXT, ...),
    ("```python\n[f(a=1)]\n```", False, ParseFailure.CODE_FENCE, ...),
    ("<TOOLCALL>```python\n[f(a=1)]\n```</TOOLCALL>", True, ParseFailure.CODE_FENCE, ...),
    ("<TOOLCALL>[f(a=1)]</TOOLCALL>", False, ParseFailure.UNEXPECTED_TAG, ...),
    ("I cannot answer that.", False, ParseFailure.PROSE_ONLY, ...),
    ("[f(a=1)", False, OK, ({"f": {"a": 1}},)),  # bfcl-eval appends the missing "]"
    ("[f(a=1", False, ParseFailure.UNCLOSED_BRACKET, ...),
    ("[f(a='x)]", False, ParseFailure.UNCLOSED_BRACKET, ...),
    ('[f(a=\\"x\\")]', False, ParseFailure.BAD_ESCAPING, ...),
    ("[f(a=1) g(b=2)]", False, ParseFailure.BAD_SYNTAX, ...),
    ("[f(a=1)]\n[g(b=2)]", False, ParseFailure.BAD_SYNTAX, ...),
    ('[{"function": "f", "parameters": {"a": 1}}]', False, ParseFailure.WRONG_FORMAT, ...),
    ('<functions><function name="f"></function></functions>', False, ParseFailure.WRONG_FORMAT, ...),
    ("['f', 'g']", False, ParseFailure.NOT_A_CALL, ...),
    ("[f(a=1)][0]", False, ParseFailure.EXTRA_TEXT, ...),
    ("[f(a={1, 2})]", False, ParseFailure.BAD_VALUE, ...),
    ("[f(a=x.y)]", False, ParseFailure.BAD_VALUE, ...),
    ("[f(a=f'x')]", False, ParseFailure.BAD_VALUE, ...),
    ("[f(a=-x)]", False, ParseFailure.BAD_VALUE, ...),
    ("[f(a=-2**2)]", False, ParseFailure.BAD_VALUE, ...),  # bfcl-eval: AttributeError
    ("[f(a=1/0)]", False, ParseFailure.BAD_VALUE, ...),
    ("[f(a='x' + 1)]", False, ParseFailure.BAD_VALUE, ...),
    ("[f(a=1, a=2)]", False, OK, ({"f": {"a": 2}},)),  # a compile-time error, not a parse error
    ("[f(a=007)]", False, ParseFailure.BAD_SYNTAX, ...),
]


@pytest.mark.parametrize(("text", "tag", "kind", "calls"), CASES, ids=[repr(c[0])[:40] for c in CASES])
def test_python_cases_match_bfcl(check_bfcl, text, tag, kind, calls):
    r = check_bfcl(text, "python", tag)
    assert r.failure is kind, r.details
    if calls is not ...:
        assert r.calls == calls
        assert [type(v) for c in r.calls for a in c.values() for v in a.values()] == \
               [type(v) for c in calls for a in c.values() for v in a.values()]


def test_detected_format_and_flags_on_success():
    r = parse_response("Note: <TOOLCALL>[f(a=1)]</TOOLCALL>", "python", True)
    assert r.ok and r.detected_format == "python" and r.tag_found and r.prose
    r = parse_response("<TOOLCALL>[f(a=1)]</TOOLCALL>", "python", True)
    assert r.ok and not r.prose and not r.code_fence and r.bfcl_error_type is None


@pytest.mark.parametrize(
    ("text", "deviation", "kind"),
    [
        ("[f(a=__import__('os').getcwd() + 'x')]", Deviation.EVAL_REFUSED, ParseFailure.UNSAFE_EXPRESSION),
        ("[f(a=open('x').read() * 2)]", Deviation.EVAL_REFUSED, ParseFailure.UNSAFE_EXPRESSION),
        ("[f(a=len('ab') + 1)]", Deviation.EVAL_REFUSED, ParseFailure.UNSAFE_EXPRESSION),
        ("[f(a=10**5000)]", Deviation.ARITH_BOUNDS, ParseFailure.UNSAFE_EXPRESSION),
        ("[f(a=9**9**9)]", Deviation.ARITH_BOUNDS, ParseFailure.UNSAFE_EXPRESSION),
        ("[f(a='x' * 1000000000)]", Deviation.EVAL_REFUSED, ParseFailure.UNSAFE_EXPRESSION),
        ("[f(a=" + "+".join(["1"] * 100) + ")]", Deviation.ARITH_BOUNDS, ParseFailure.UNSAFE_EXPRESSION),
        ("[f(a=1 << 3)]", Deviation.EVAL_REFUSED, ParseFailure.UNSAFE_EXPRESSION),
        ("[f(a=not 1)]", Deviation.UNARY_OP, ParseFailure.BAD_VALUE),
        ("[f(a=~1)]", Deviation.UNARY_OP, ParseFailure.BAD_VALUE),
        ("[f(**kw)]", Deviation.KWARGS_UNPACK, ParseFailure.NOT_A_CALL),
    ],
)
def test_deliberate_differences_are_flagged(text, deviation, kind):
    r = parse_response(text, "python", False)
    assert r.failure is kind
    assert r.bfcl_deviation is deviation


def test_lambda_is_refused_and_bfcl_fails_too():
    """bfcl-eval's lambda branch indexes an AST node and raises: no deviation."""
    r = parse_response("[f(a=lambda: 1)]", "python", False)
    assert r.failure is ParseFailure.UNSAFE_EXPRESSION
    assert r.bfcl_error_type == "ast_decoder:decoder_failed" and r.bfcl_deviation is None


def test_unary_plus_is_identity_not_negation(bfcl):
    """bfcl-eval reads +5 as -5; we read 5 and flag the deviation."""
    r = parse_response("[f(a=+5, b=-5)]", "python", False)
    assert r.calls == ({"f": {"a": 5, "b": -5}},)
    assert r.bfcl_deviation is Deviation.UNARY_OP
    assert bfcl("[f(a=+5, b=-5)]", "python", False) == ("ok", [{"f": {"a": -5, "b": -5}}])


def test_not_and_invert_flag_a_deviation_from_bfcl(bfcl):
    assert bfcl("[f(a=not 1, b=~3)]", "python", False) == ("ok", [{"f": {"a": -1, "b": -3}}])


def test_kwargs_unpack_bfcl_gives_none_key(bfcl):
    assert bfcl("[f(**kw)]", "python", False) == ("ok", [{"f": {None: "kw"}}])


@pytest.mark.parametrize(
    "text",
    [
        "[f(a=1, b='x', c=[1, 2.5, -3], d={'k': (1, None)}, e=True, g=h(i=1), j=k())]",
        "f(a=1), g(b=2)",
        "[f(a=\"it's\", b='say \"hi\"', c='tab\\there')]",
        "[m.n.o(a=1.5e3, b=.5, c=5., d=-0.0)]",
        "[f(a=(1), b=(1,), c=(), d=[], e={}, f=[1,], g={'a': 1,})]",
    ],
)
def test_fast_path_equals_ast_path(text):
    """The fast subset parser gives exactly the ast path's values (which follow bfcl-eval)."""
    fast = parse_calls_fast(text, tokenize(text) or [])
    slow, deviation = parse_calls_ast(text)
    assert repr(fast) == repr(slow) and deviation is None


@pytest.mark.parametrize(
    "text",
    ["[f(a=1+2)]", "[f(1)]", "[f(a='\\x41')]", "[f(a=r'x')]", "[f(a='a' 'b')]", "[f(a=1_0)]", "[f(é=1)]",
     "[f(a=1) # c\n]", "f(a=1)\n, g(b=2)", " [f(a=1)]", "[f(a=x.y)]", "[f(a={1, 2})]", "[f(a=0x1)]"],
)
def test_fast_path_declines_what_it_does_not_know(text):
    with pytest.raises(Decline):
        parse_calls_fast(text, tokenize(text) or [])


@pytest.mark.parametrize(
    "text", ["[1, 2.5, -3, +4]", "{'a': [1, (2,)], 'b': None}", "(1)", "(1,)", "()", "'x\\ny'", "True", " [1]"],
)
def test_fast_literal_equals_literal_eval(text):
    assert repr(parse_literal_fast(text)) == repr(ast.literal_eval(text.lstrip(" \t")))


# -- the syntax-error shortcut (_pyfast.certain_syntax_error) -----------------

_PIECES = ["[", "]", "(", ")", "{", "}", "f", "g.h", "a", "b", "=", "==", "!=", "1", "2.5", "-", ",", " ", "\n",
           "'x'", '"y"', "'", '"', "Sure", "!", "?", "$", "`", ":", "here", "are", "I'll", "it's", "if", "else",
           "not", "in", "_", "case", "match", "print", ".", "*", "+", "#", "\\", "f'", "rb", "\t", "é", "'''",
           "04", "2nd", "0x1g", "1_0", "\x01", "\x0c", "<TOOLCALL>", "</", ">", "<", "/", ";", "@", "%"]


def _ast_kind(text: str) -> ParseFailure | None:
    """The failure kind the ``ast`` path gives ``text``; None when ast.parse accepts it."""
    import warnings

    from promptgrid.matrix.scoring.parse._pyast import syntax_failure

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ast.parse(text, mode="eval")
        except SyntaxError as exc:
            return syntax_failure(exc, text).kind
        except (ValueError, RecursionError, MemoryError):
            return ParseFailure.BAD_SYNTAX
    return None


def _shortcut_agrees(text: str) -> bool:
    from promptgrid.matrix.scoring.parse._pyfast import Mismatch, certain_syntax_error

    if starts_with_prose(text):  # the verdict-only parse's proof from the first tokens
        assert _ast_kind(text) is not None, text
    toks = tokenize(text)
    if toks is None:
        return False
    try:
        parse_calls_fast(text, toks)
    except Mismatch:  # the fast path's own proof of a bracket closed by the wrong one
        assert _ast_kind(text) is ParseFailure.UNCLOSED_BRACKET, text
    except Exception:  # noqa: BLE001 - Decline, TooDeep: nothing claimed
        pass
    certain = certain_syntax_error(text, toks)
    quick = certain_syntax_error(text, toks, first=True)  # any error proven is an error
    if quick is not None:
        assert _ast_kind(text) is not None, (text, quick)
    if certain is None:
        return False
    assert quick is not None, text
    assert _ast_kind(text) is certain[0], (text, certain)
    return True


def test_syntax_error_shortcut_agrees_with_ast_on_generated_texts() -> None:
    """Where the shortcut decides, ast.parse fails with the same kind (20,000 texts from answer-like pieces)."""
    import random

    rng = random.Random(7)
    decided = prose = 0
    for _ in range(20_000):
        text = "".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 14))).strip()
        if text:
            decided += _shortcut_agrees(text)
            prose += starts_with_prose(text)
    assert decided > 2_000 and prose > 300  # the shortcuts are exercised, not vacuous


@pytest.mark.parametrize("text", [
    "[Sure! Here are the calls:\n[math.gcd(num1=40, num2=50)]",
    "[math.gcd(num1=40, num2=50]",
    "[I'll call f(a='x')]",
    "[f(a=1)]]",
    "[a ! b, \"x]",
    "[Sure! f(a=1]",
    "[f(a=1)] ) ]",
])
def test_syntax_error_shortcut_on_answers(text: str) -> None:
    assert _shortcut_agrees(text)


@pytest.mark.parametrize("text", ["[Sure! Here are the calls: f(a=1)]", "[Here are f(a=1)", "Sure? f(a=1)",
                                  "[I $ f(a=1)]", "[print hello(a=1)]"])
def test_prose_at_the_start_is_a_syntax_error(text: str) -> None:
    assert starts_with_prose(text) and _ast_kind(text) is not None


@pytest.mark.parametrize("text", ["[f(a=1)]", "[f(a=1) != 2]", "[not f(a=1)]", "[x if y else f(a=1)]",
                                  "[Suré Here f(a=1)]", "[a\n b(c=1)]", "[f(a=1) for f in g]", "[lambda x: f(a=1)]"])
def test_prose_at_the_start_is_left_to_the_full_parse_otherwise(text: str) -> None:
    assert not starts_with_prose(text)


@pytest.mark.parametrize("text", ["[x = 1]", "[f(a=1)] [", "[Here are f(a=1)", "[f(a=1) if b]", "[not a]",
                                  "[f(a=1) != 2]", "[f'{a!r}' x]", "[a # b c\n]", "[a b \\\n c]"])
def test_syntax_error_shortcut_leaves_unsure_texts_to_ast(text: str) -> None:
    from promptgrid.matrix.scoring.parse._pyfast import certain_syntax_error

    assert certain_syntax_error(text, tokenize(text)) is None


@pytest.mark.parametrize(("text", "calls"), [("[]", []), ("[ ]", []), ("[\n]", []), ("[] ", None), (" []", None),
                                             ("[[]]", None), ("[1, 2]", None), ("x", None), ("[]]", None)])
def test_texts_without_parentheses(text: str, calls: list[Any] | None) -> None:
    """No "(": an empty list is the one success (as the fast path reads it), anything else is not a call."""
    from promptgrid.matrix.scoring.parse._fail import Fail
    from promptgrid.matrix.scoring.parse._python import parse_python_calls

    if calls is not None:
        assert parse_python_calls(text) == (calls, None)
        return
    with pytest.raises(Fail) as info:
        parse_python_calls(text)
    assert info.value.kind is ParseFailure.NOT_A_CALL


# ------------------------------------------------------------------ positional arguments (conversations only)

@pytest.mark.parametrize(("text", "dropped", "kept"), [
    ("[sort('final_report.pdf')]", ({"sort": {}},), ({"sort": {"*": ("final_report.pdf",)}},)),
    ("[tail('a.txt', lines=5), ls()]", ({"tail": {"lines": 5}}, {"ls": {}}),
     ({"tail": {"lines": 5, "*": ("a.txt",)}}, {"ls": {}})),
    ("<TOOLCALL>[mean([1, 2], -3)]</TOOLCALL>", ({"mean": {}},), ({"mean": {"*": ([1, 2], -3)}},)),
    ("[f(g(1), x=h(y=2))]", ({"f": {"x": {"h": {"y": 2}}}},), ({"f": {"x": {"h": {"y": 2}}, "*": ("g(1)",)}},)),
])
def test_positional_arguments_are_dropped_as_bfcl_eval_does_unless_asked_for(
        text: str, dropped: tuple[Any, ...], kept: tuple[Any, ...]) -> None:
    from promptgrid.matrix.scoring.parse import POSITIONAL

    tag = text.startswith("<TOOLCALL>")
    assert POSITIONAL == "*"
    plain = parse_response(text, "python", tag)
    assert plain.calls == dropped  # single-turn scoring: bfcl-eval's ast_parse drops them
    assert parse_response(text, "python", tag, positional=True).calls == kept
    assert parse_response(text, "python", tag).calls == dropped  # no memo shared between the two


def test_positional_unpacking_is_a_decode_failure_when_kept() -> None:
    assert parse_response("[cd(*['x'])]", "python", False).calls == ({"cd": {}},)
    kept = parse_response("[cd(*['x'])]", "python", False, positional=True)
    assert kept.failure is ParseFailure.NOT_A_CALL and "unpacks" in kept.details
