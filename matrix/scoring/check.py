"""BFCL's AST checking rules over decoded calls, compiled once per case.

The rules are those of bfcl-eval 2026.3.23 (``ast_checker.py``) as its
format-sensitivity runner applies them (Python rules for every entry), and
as the BFCL authors state them (seeds/bfcl_icml2025_reviews.txt, rebuttal to
reviewer dutu):

- all-or-nothing: every expected call must be matched, the count must agree;
- parallel calls are matched in any order: each expected call, in order,
  takes the first still-unmatched predicted call that passes (bfcl-eval's
  greedy matching, kept for agreement; see ``_check_parallel``);
- an ``int`` is accepted where the schema says ``float``; never the reverse;
- strings compare after standardization: lower case, and the characters
  `` ,./-_*^`` removed (bfcl-eval removes the space character only, not
  tabs or newlines, and turns ``'`` into ``"``; we follow its code);
- lists compare in order, element-wise (strings standardized one level
  deep); dicts by key presence and per-key acceptable values;
- a parameter is optional for the case when ``""`` is among its acceptable
  values; a parameter neither in the schema nor in the answer is rejected;
- types come from the function schema (BFCL JSON schema: string, integer,
  float, boolean, array, tuple, dict, any; we also read number as float and
  object as dict, which bfcl-eval does not know and would crash on).

Why compile: bfcl-eval re-standardizes every acceptable value and re-reads
the schema for every response. Here each case's ground truth and schema are
turned into ``_ParamRule`` objects once (``compile_case``, cached per
``Case``), so scoring N responses to one case pays for that work once.

Deliberate differences from bfcl-eval (each one only where bfcl-eval would
crash; none changes a verdict bfcl-eval can produce): unknown schema types
are not type-checked; an array/tuple schema without ``items`` gets no
element check; a ground-truth call naming a function absent from the
offered functions is checked against its own answer keys.
"""

from __future__ import annotations

import enum
import functools
import re
import weakref
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from promptgrid.records import Case

from .verdict import ErrorCode

__all__ = [
    "CheckResult",
    "CompiledCase",
    "Mode",
    "MatchCounts",
    "check_calls",
    "compile_case",
    "count_matches",
    "param_error",
    "standardize_string",
]

Call = Mapping[str, Mapping[str, Any]]

# --------------------------------------------------------------------------- strings

_STRIP = re.compile(r"[ ,./\-_*^]")


def standardize_string(text: str) -> str:
    """BFCL's string normalization: drop `` ,./-_*^``, lower-case, ``'`` -> ``"``.

    So "April 1, 2024", "april 1 2024" and "April-1-2024" compare equal.
    """
    return _STRIP.sub("", text).lower().replace("'", '"')


def _std(value: Any) -> Any:
    return standardize_string(value) if type(value) is str else value


# --------------------------------------------------------------------------- schema types

# Schema type -> the Python type a decoded value must have. "any" is str, as
# in bfcl-eval; "tuple" is list because tuples are compared as lists.
_PY_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "float": float,
    "number": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "object": dict,
    "any": str,
}
_FLOAT_TYPES = frozenset({"float", "number"})
_NESTED_TYPES = frozenset({"array", "tuple"})


class Mode(enum.Enum):
    """Which bfcl-eval checker a case goes to (bfcl-eval picks it by substring of the category)."""

    SIMPLE = "simple"
    MULTIPLE = "multiple"
    PARALLEL = "parallel"
    IRRELEVANCE = "irrelevance"
    RELEVANCE = "relevance"


def _mode(category: str, has_ground_truth: bool) -> Mode:
    if "irrelevance" in category:
        return Mode.IRRELEVANCE
    if "relevance" in category:
        return Mode.RELEVANCE
    if not has_ground_truth:
        return Mode.IRRELEVANCE
    if "parallel" in category:
        return Mode.PARALLEL
    if "multiple" in category:
        return Mode.MULTIPLE
    return Mode.SIMPLE


# --------------------------------------------------------------------------- compiled rules

_SKIP = object()  # an acceptable dict value of "" (optional): bfcl-eval skips it


@dataclass(frozen=True)
class _DictAnswer:
    """One acceptable dict: its acceptable values per key (standardized), keys it needs."""

    values: Mapping[Any, list[Any]]
    needed: tuple[Any, ...]


def _as_list(values: Any) -> list[Any]:
    return list(values) if isinstance(values, (list, tuple)) else [values]


def _compile_dict(answer: Any) -> Any:
    if isinstance(answer, str) and answer == "":
        return _SKIP
    if not isinstance(answer, Mapping):
        return None  # bfcl-eval would crash; never acceptable here
    values = {k: [_std(x) for x in _as_list(v)] for k, v in answer.items()}
    needed = tuple(k for k, v in answer.items() if "" not in _as_list(v))
    return _DictAnswer(values, needed)


@dataclass(frozen=True, eq=False)
class _ParamRule:
    """Everything needed to check one parameter of one expected call, precomputed."""

    name: str
    type_name: str | None
    py_type: type[Any] | None
    nested: type | None
    answers: tuple[Any, ...]
    answer_type: type[Any] | None  # type of the first non-"" acceptable value
    std_strings: frozenset[str]
    std_lists: tuple[list[Any], ...]
    nested_always_ok: bool  # a non-list acceptable value makes bfcl's element check pass
    nested_inner_types: tuple[type | None, ...]
    dict_answers: tuple[Any, ...]
    list_dict_answers: tuple[tuple[Any, ...], ...]
    optional: bool
    check: Callable[[Any], ErrorCode | None] = field(default=None, repr=False)  # type: ignore[assignment]


def _first_type(values: Sequence[Any]) -> type | None:
    for v in values:
        if not (type(v) is str and v == ""):
            return type(v)
    return None


def _compile_param(name: str, schema: Mapping[str, Any] | None, answers_raw: Any) -> _ParamRule:
    answers = tuple(_as_list(answers_raw))
    type_name = schema.get("type") if isinstance(schema, Mapping) else None
    type_name = type_name if isinstance(type_name, str) else None
    py_type = _PY_TYPES.get(type_name) if type_name else None
    nested: type | None = None
    if type_name in _NESTED_TYPES and isinstance(schema, Mapping):
        items = schema.get("items")
        if isinstance(items, Mapping) and isinstance(items.get("type"), str):
            nested = _PY_TYPES.get(items["type"])
    std_strings = frozenset(standardize_string(a) for a in answers if type(a) is str)
    std_lists: list[list[Any]] = []
    for a in answers:
        if isinstance(a, (list, tuple, str)):
            std_lists.append([_std(x) for x in a])  # "" -> [] as in bfcl-eval
    nested_inner = tuple(_first_type(a) for a in answers if type(a) is list)
    nested_always = any(type(a) is not list for a in answers)
    dict_answers = tuple(_compile_dict(a) for a in answers) if py_type is dict else ()
    list_dict: list[tuple[Any, ...]] = []
    if py_type is list and nested is dict:
        for a in answers:
            if isinstance(a, (list, tuple, str)):
                list_dict.append(tuple(_compile_dict(x) for x in a))
    rule = _ParamRule(
        name=name,
        type_name=type_name,
        py_type=py_type,
        nested=nested,
        answers=answers,
        answer_type=_first_type(answers),
        std_strings=std_strings,
        std_lists=tuple(std_lists),
        nested_always_ok=nested_always,
        nested_inner_types=nested_inner,
        dict_answers=dict_answers,
        list_dict_answers=tuple(list_dict),
        optional="" in answers,
    )
    object.__setattr__(rule, "check", _specialize(rule))
    return rule


@dataclass(frozen=True, eq=False)
class _ExpectedCall:
    """One expected call: the schema's required names, the answer's rules."""

    name: str
    required: tuple[str, ...]
    schema_params: frozenset[str]
    rules: Mapping[str, _ParamRule]  # params both in the schema and in the answer
    answer_params: frozenset[str]
    needed: tuple[str, ...]  # answer params without "" (must be supplied)
    needed_set: frozenset[str] = frozenset()


@dataclass(frozen=True, eq=False)
class CompiledCase:
    """A case's ground truth and schema, normalized once for fast checking."""

    mode: Mode
    expected: tuple[_ExpectedCall, ...]
    offered_names: frozenset[str]
    expected_names: Mapping[str, int] = field(default_factory=dict)  # gold function names, with counts

    n_gold_names: int = 0  # sum of expected_names' counts


def _find_function(functions: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any] | None:
    for f in functions:
        if f.get("name") == name:
            return f
    return None


def _compile_call(schema: Mapping[str, Any] | None, name: str, answer: Mapping[str, Any]) -> _ExpectedCall:
    params = schema.get("parameters", {}) if schema is not None else {}
    props: Mapping[str, Any] = params.get("properties", {}) if isinstance(params, Mapping) else {}
    required = params.get("required", []) if isinstance(params, Mapping) else []
    if schema is None:  # no schema: the answer's keys stand in for it, untyped
        props = {k: {} for k in answer}
    rules = {p: _compile_param(p, props[p], v) for p, v in answer.items() if p in props}
    needed = tuple(p for p, v in answer.items() if "" not in _as_list(v))
    return _ExpectedCall(
        name=name,
        required=tuple(required or ()),
        schema_params=frozenset(props),
        rules=rules,
        answer_params=frozenset(answer),
        needed=needed,
        needed_set=frozenset(needed),
    )


def _compile(case: Case) -> CompiledCase:
    functions = tuple(case.functions)
    mode = _mode(case.category, bool(case.ground_truth))
    expected: list[_ExpectedCall] = []
    names: Counter[str] = Counter()
    if mode not in (Mode.IRRELEVANCE, Mode.RELEVANCE):
        for i, gt in enumerate(case.ground_truth):
            ((gt_name, answer),) = list(gt.items())[:1] or [("", {})]
            names[gt_name] += 1
            if mode is Mode.SIMPLE and i == 0 and functions:
                # bfcl-eval's simple checker uses the first function's schema and name.
                schema: Mapping[str, Any] | None = functions[0]
                name = str(functions[0].get("name", gt_name))
            else:
                schema = _find_function(functions, gt_name)
                name = gt_name
            expected.append(_compile_call(schema, name, answer))
    offered = frozenset(str(f.get("name")) for f in functions)
    return CompiledCase(mode, tuple(expected), offered, dict(names), sum(names.values()))


# id(case) -> compiled rules. Case records compare by identity (eq=False), so
# their id is their identity; a finalizer drops the entry when the case is
# collected, before its id can be reused. (A WeakKeyDictionary lookup builds a
# weak reference per call: slower on this path, which runs once per response.)
_CACHE: dict[int, CompiledCase] = {}


def compile_case(case: Case) -> CompiledCase:
    """The case's compiled rules, built on first use and cached for the life of the ``Case``."""
    compiled = _CACHE.get(id(case))
    if compiled is None:
        compiled = _compile(case)
        _CACHE[id(case)] = compiled
        weakref.finalize(case, _CACHE.pop, id(case), None)
    return compiled


# --------------------------------------------------------------------------- checking

class _NoValue(enum.Enum):
    """The type of ``_NO_VALUE``: a one-member enum, so a type checker narrows ``x is _NO_VALUE``."""

    NO_VALUE = enum.auto()


_NO_VALUE: Final = _NoValue.NO_VALUE


class CheckResult(NamedTuple):
    """The checker's answer for one list of decoded calls (immutable; a NamedTuple because it is made per response).

    ``detail`` is the underlying error behind a parallel ``cannot_find_match``
    (the error of the same-named predicted call, or ``WRONG_FUNC_NAME``), so
    failure modes can say *what* did not match; otherwise it equals ``code``.
    The message is built on demand: most results are never read by a person.
    """

    code: ErrorCode
    note: str = ""
    detail: ErrorCode = ErrorCode.VALID
    func: str | None = None
    param: str | None = None
    value: Any = _NO_VALUE

    @property
    def valid(self) -> bool:
        return self.code is ErrorCode.VALID

    @property
    def message(self) -> str:
        """One readable line: what did not match, where."""
        if self.code is ErrorCode.VALID:
            return ""
        reason = self.detail if self.detail is not ErrorCode.VALID else self.code
        where = f"{self.func}: " if self.func else ""
        if self.param is not None and self.value is not _NO_VALUE:
            what = f"{where}parameter {self.param!r} = {self.value!r} is not acceptable ({reason.value})"
        elif self.param is not None:
            what = f"{where}parameter {self.param!r}: {reason.value}"
        else:
            what = f"{where}{reason.value}"
        note = self.note
        if not note and type(self.value) is _CalledNames:
            note = f"expected a call to {self.func!r}, got {', '.join(self.value)!r}"
        return f"{what}; {note}" if note else what


class _CalledNames(tuple[str, ...]):
    """The names a wrong call used (``CheckResult.value`` of WRONG_FUNC_NAME), spelled out only in ``message``."""


_OK = CheckResult(ErrorCode.VALID)

_T_SIMPLE = ErrorCode.TYPE_ERROR_SIMPLE
_V_STRING = ErrorCode.VALUE_ERROR_STRING
_V_OTHERS = ErrorCode.VALUE_ERROR_OTHERS


@functools.lru_cache(maxsize=1024)
def _count_error(code: ErrorCode, template: str, expected: int, got: int) -> CheckResult:
    """A wrong-count result (shared: results are immutable, and the same counts recur)."""
    return CheckResult(code, template.format(expected=expected, got=got), code)


def _nested_ok(rule: _ParamRule, value: list[Any]) -> bool:
    if rule.nested_always_ok:
        return True
    nested = rule.nested
    for inner in rule.nested_inner_types:
        if all(type(v) is nested or type(v) is inner for v in value):
            return True
    return False


def _dict_error(value: Mapping[Any, Any], answers: Sequence[Any]) -> ErrorCode | None:
    """bfcl-eval's dict check: keys present, each value acceptable; first matching answer wins."""
    error = ErrorCode.DICT_CHECKER_UNCLEAR
    for answer in answers:
        if answer is _SKIP:
            continue
        if answer is None:
            error = ErrorCode.DICT_CHECKER_UNCLEAR
            continue
        error = ErrorCode.DICT_CHECKER_UNCLEAR
        ok = True
        for key, v in value.items():
            acceptable = answer.values.get(key, _SKIP)
            if acceptable is _SKIP:
                error, ok = ErrorCode.VALUE_ERROR_DICT_KEY, False
                break
            if _std(v) not in acceptable:
                error, ok = ErrorCode.VALUE_ERROR_DICT_VALUE, False
                break
        # bfcl-eval runs the missing-key loop even after a value failed; it can overwrite the code.
        for key in answer.needed:
            if key not in value:
                error, ok = ErrorCode.VALUE_ERROR_DICT_KEY, False
                break
        if ok:
            return None
    return error


def _list_dict_error(value: list[Any], answers: Sequence[tuple[Any, ...]]) -> ErrorCode | None:
    error: ErrorCode | None = ErrorCode.LIST_DICT_CHECKER_UNCLEAR
    for answer in answers:
        if len(value) != len(answer):
            error = ErrorCode.VALUE_ERROR_LIST_DICT_COUNT
            continue
        ok = True
        for item, expected in zip(value, answer, strict=True):
            error = _dict_error(item, (expected,)) if isinstance(item, Mapping) else ErrorCode.DICT_CHECKER_UNCLEAR
            if error is not None:
                ok = False
                break
        if ok:
            return None
    return error


def param_error(rule: _ParamRule, value: Any) -> ErrorCode | None:
    """The error of one supplied parameter value (type, then value), or ``None`` if acceptable."""
    return rule.check(value)


def _generic_check(rule: _ParamRule, value: Any) -> ErrorCode | None:
    """bfcl-eval's type_checker + value checkers for one value, every branch."""
    type_name = rule.type_name
    if type_name == "tuple" and type(value) is tuple:
        value = list(value)
    elif type_name in _FLOAT_TYPES and type(value) is int:
        value = float(value)
    py_type = rule.py_type
    answer_type = rule.answer_type
    if py_type is None:  # unknown schema type: no type check (bfcl-eval would crash)
        return _untyped_error(rule, value)
    # Type check. A ground truth whose values are not of the schema type holds a
    # "variable" (e.g. the string "data['sales']" for an array): bfcl-eval then
    # compares raw values only.
    if type(value) is py_type:
        variable = answer_type is not None and answer_type is not py_type
        if rule.nested is not None and not _nested_ok(rule, value):
            return ErrorCode.TYPE_ERROR_NESTED if type(value) is answer_type else _T_SIMPLE
    elif answer_type is not None and type(value) is answer_type:
        variable = True
    else:
        return _T_SIMPLE
    if not variable:
        return _typed_value_error(rule, py_type, value)
    return None if value in rule.answers else _V_OTHERS


def _untyped_error(rule: _ParamRule, value: Any) -> ErrorCode | None:
    """The value check of a parameter whose schema type is unknown (strings standardized, others raw)."""
    if type(value) is str:
        return None if standardize_string(value) in rule.std_strings else _V_STRING
    return None if value in rule.answers else _V_OTHERS


def _typed_value_error(rule: _ParamRule, py_type: type, value: Any) -> ErrorCode | None:
    """bfcl-eval's value checker for a value of the schema type ``py_type`` (no "variable" answer)."""
    if py_type is dict:
        return _dict_error(value, rule.dict_answers)
    if py_type is list and rule.nested is dict:
        return _list_dict_error(value, rule.list_dict_answers)
    if py_type is str:
        return None if standardize_string(value) in rule.std_strings else _V_STRING
    if py_type is list:
        return None if [_std(x) for x in value] in rule.std_lists else ErrorCode.VALUE_ERROR_LIST
    return None if value in rule.answers else _V_OTHERS


def _hashable_set(values: Sequence[Any]) -> frozenset[Any] | None:
    try:
        return frozenset(values)
    except TypeError:
        return None


def _specialize(rule: _ParamRule) -> Callable[[Any], ErrorCode | None]:
    """A fast checker for the common shapes (scalar types, no "variable" answers); else the generic one.

    Same results as ``_generic_check``: only branches that cannot be taken
    for this rule are dropped. Membership in a frozenset equals membership in
    the answer list for hashable values (``1 == 1.0 == True`` hash alike).
    """
    py_type, answer_type = rule.py_type, rule.answer_type
    plain = answer_type is None or answer_type is py_type
    if py_type is str and plain:
        return _string_checker(rule)
    answers = _hashable_set(rule.answers)
    if answers is not None and plain and (py_type is int or py_type is bool):
        return _exact_type_checker(py_type, answers)
    if answers is not None and plain and py_type is float:
        return _float_checker(answers)
    return functools.partial(_generic_check, rule)


def _string_checker(rule: _ParamRule) -> Callable[[Any], ErrorCode | None]:
    """The checker of a string parameter: exact acceptable strings first, then standardized ones."""
    strings = rule.std_strings
    sub = _STRIP.sub
    # An answer written exactly as an acceptable value standardizes to it:
    # most correct answers pass on this set lookup, without the regex.
    exact = frozenset(a for a in rule.answers if type(a) is str)

    def check_str(value: Any) -> ErrorCode | None:
        if type(value) is str:
            if value in exact:
                return None
            return None if sub("", value).lower().replace("'", '"') in strings else _V_STRING
        return _T_SIMPLE

    return check_str


def _exact_type_checker(exact_type: type, answers: frozenset[Any]) -> Callable[[Any], ErrorCode | None]:
    """The checker of an int or bool parameter: that exact type, then membership in ``answers``."""

    def check_exact(value: Any) -> ErrorCode | None:
        if type(value) is exact_type:
            return None if value in answers else _V_OTHERS
        return _T_SIMPLE

    return check_exact


def _float_checker(answers: frozenset[Any]) -> Callable[[Any], ErrorCode | None]:
    """The checker of a float parameter: a float or an int (bfcl-eval's int-to-float rule), in ``answers``."""

    def check_float(value: Any) -> ErrorCode | None:
        kind = type(value)
        if kind is float or kind is int:
            return None if value in answers else _V_OTHERS
        return _T_SIMPLE

    return check_float


def _check_one(expected: _ExpectedCall, call: Call) -> tuple[ErrorCode, str | None, Any] | None:
    """bfcl-eval's simple_function_checker for one predicted call; ``None`` when it passes."""
    params = call.get(expected.name, _NO_VALUE)
    if params is _NO_VALUE:
        return ErrorCode.WRONG_FUNC_NAME, None, _NO_VALUE
    for p in expected.required:
        if p not in params:
            return ErrorCode.MISSING_REQUIRED, p, _NO_VALUE
    rules = expected.rules
    for p, value in params.items():
        rule = rules.get(p)
        if rule is None:
            return ErrorCode.UNEXPECTED_PARAM, p, _NO_VALUE
        error = rule.check(value)
        if error is not None:
            return error, p, value
    for p in expected.needed:
        if p not in params:
            return ErrorCode.MISSING_OPTIONAL, p, _NO_VALUE
    return None


def _one(expected: _ExpectedCall, call: Call) -> CheckResult:
    failure = _check_one(expected, call)
    if failure is None:
        return _OK
    code, param, value = failure
    if code is ErrorCode.WRONG_FUNC_NAME:
        return CheckResult(code, "", code, expected.name, None, _CalledNames(map(str, call)))
    return CheckResult(code, "", code, expected.name, param, value)


def _check_parallel(compiled: CompiledCase, calls: Sequence[Call]) -> CheckResult:
    """Any-order matching, greedy like bfcl-eval's ``parallel_function_checker_no_order``.

    Each expected call in order takes the first unmatched predicted call that
    passes. A maximum bipartite matching would accept a few more responses
    (when one predicted call passes for two expected ones); bfcl-eval does
    not, and agreement with the leaderboard matters more here.
    """
    n = len(compiled.expected)
    if len(calls) != n:
        return _count_error(ErrorCode.PARALLEL_WRONG_COUNT, "expected {expected} calls, got {got}", n, len(calls))
    unmatched = list(range(n))
    for i, expected in enumerate(compiled.expected):
        same_name: tuple[ErrorCode, str | None, Any] | None = None
        for k, j in enumerate(unmatched):
            failure = _check_one(expected, calls[j])
            if failure is None:
                del unmatched[k]
                break
            if same_name is None and failure[0] is not ErrorCode.WRONG_FUNC_NAME:
                same_name = failure
        else:
            code, param, value = same_name or (ErrorCode.WRONG_FUNC_NAME, None, _NO_VALUE)
            return CheckResult(ErrorCode.PARALLEL_NO_MATCH, f"no predicted call matches expected call {i}",
                               code, expected.name, param, value)
    return _OK


def check_calls(calls: Sequence[Call], case: Case | CompiledCase) -> CheckResult:
    """Check decoded calls (``[{func: {param: value}}, ...]``) against a case, by BFCL's AST rules.

    For irrelevance cases a non-empty list of calls is the error (the caller
    handles a failed decode, which is right for them).
    """
    compiled = case if type(case) is CompiledCase else compile_case(case)  # type: ignore[arg-type]
    mode = compiled.mode
    if mode is Mode.PARALLEL:
        return _check_parallel(compiled, calls)
    if mode is Mode.SIMPLE:
        if len(calls) != 1:
            return _count_error(ErrorCode.SIMPLE_WRONG_COUNT, "expected {expected} call, got {got}", 1, len(calls))
        return _one(compiled.expected[0], calls[0])
    if mode is Mode.MULTIPLE:
        if len(calls) != len(compiled.expected):
            return _count_error(ErrorCode.MULTIPLE_WRONG_COUNT, "expected {expected} call(s), got {got}",
                                len(compiled.expected), len(calls))
        return _one(compiled.expected[0], calls[0])
    if mode is Mode.IRRELEVANCE:
        if _has_call(calls):
            return CheckResult(ErrorCode.IRRELEVANCE_DECODER_SUCCESS, "a call was made where none was expected",
                               ErrorCode.IRRELEVANCE_DECODER_SUCCESS)
        return _OK
    if _has_call(calls):
        return _OK
    return CheckResult(ErrorCode.RELEVANCE_DECODER_FAILED, "no call was made where one was expected",
                       ErrorCode.RELEVANCE_DECODER_FAILED)


def _has_call(calls: Sequence[Call]) -> bool:
    """bfcl-eval's ``not is_empty_output``: ``[]`` and ``[{}]`` hold no call."""
    if len(calls) == 0:
        return False
    return not (len(calls) == 1 and len(calls[0]) == 0)


# --------------------------------------------------------------------------- counts for metrics


class MatchCounts(NamedTuple):
    """Counts for FSA and the ITC tool-selection / tool-invocation metrics of one response."""

    function_selection_correct: bool
    tool_tp: int
    tool_fp: int
    tool_fn: int
    arg_tp: int
    arg_fp: int
    arg_fn: int


def _arg_score(expected: _ExpectedCall, params: Mapping[str, Any]) -> tuple[int, int, int]:
    tp = fp = needed_hit = 0
    rules = expected.rules
    needed = expected.needed_set
    for key, value in params.items():
        rule = rules.get(key)
        if rule is not None and rule.check(value) is None:
            tp += 1
            if key in needed:
                needed_hit += 1
        else:
            fp += 1
    return tp, fp, len(needed) - needed_hit


def count_matches(calls: Sequence[Call] | None, case: Case | CompiledCase) -> MatchCounts:
    """FSA and ITC counts for decoded calls (``None``: nothing decoded, i.e. no call).

    Tool selection (ITC A.3, Seal-Tools): predicted and gold function names as
    multisets; TP = size of their intersection. Tool invocation: (name, key,
    value) triples; a predicted triple is correct when its call is paired with
    an expected call of the same name and the value is acceptable by BFCL's
    rules. Gold triples are the expected parameters that must be supplied
    (acceptable values without ``""``); an optional one supplied correctly
    counts as a TP (so it enters both sides). Predicted and expected calls of
    one name are paired greedily by most correct triples.
    """
    compiled = case if type(case) is CompiledCase else compile_case(case)  # type: ignore[arg-type]
    expected_names = compiled.expected_names  # empty for (ir)relevance: no gold names
    pred_names: dict[str, int] = {}
    remaining = list(compiled.expected)
    arg_tp = arg_fp = arg_fn = 0
    n_pred = 0
    for call in calls or ():
        if not call:
            continue  # {} is no call
        name, params = next(iter(call.items()))
        n_pred += 1
        pred_names[name] = pred_names.get(name, 0) + 1
        if not isinstance(params, Mapping):
            params = {}
        best: tuple[int, int, int] | None = None
        best_e = None
        for e in remaining:
            if e.name != name:
                continue
            score = _arg_score(e, params)
            if best is None or score[0] > best[0] or (score[0] == best[0] and score[1] + score[2] < best[1] + best[2]):
                best, best_e = score, e
        if best is None or best_e is None:  # set together
            arg_fp += len(params)
            continue
        remaining.remove(best_e)
        arg_tp += best[0]
        arg_fp += best[1]
        arg_fn += best[2]
    for e in remaining:
        arg_fn += len(e.needed)
    tool_tp = 0
    for name, n in pred_names.items():
        gold = expected_names.get(name, 0)
        tool_tp += n if n < gold else gold
    tool_fp = n_pred - tool_tp
    tool_fn = compiled.n_gold_names - tool_tp
    fsa = pred_names == expected_names if compiled.mode is not Mode.RELEVANCE else n_pred > 0
    return MatchCounts(fsa, tool_tp, tool_fp, tool_fn, arg_tp, arg_fp, arg_fn)
