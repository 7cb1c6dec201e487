"""jsonl:PATH datasets: the schema, the error report, and write -> load round trips."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promptgrid.errors import DatasetError
from promptgrid.matrix.datasets import MAX_PROBLEMS, load_dataset, load_jsonl, write_jsonl
from promptgrid.records import Case

WEATHER = {
    "name": "weather.get_current",
    "description": "Get the current weather for a city.",
    "parameters": {
        "type": "dict",
        "properties": {
            "city": {"type": "string", "description": "City name."},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
        },
        "required": ["city"],
    },
}
CONVERT = {
    "name": "currency.convert",
    "description": "Convert money.",
    "parameters": {
        "type": "dict",
        "properties": {"amount": {"type": "float"}, "from_currency": {"type": "string"},
                       "to_currency": {"type": "string"}},
        "required": ["amount", "from_currency", "to_currency"],
    },
}


def _record(**overrides: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": "w1",
        "question": [[{"role": "user", "content": "Wie ist das Wetter in München?"}]],
        "function": [WEATHER],
        "ground_truth": [{"weather.get_current": {"city": ["München", "Munich"], "unit": ["", "celsius"]}}],
        "language": "de",
    }
    record.update(overrides)
    return {k: v for k, v in record.items() if v is not _DROP}


_DROP = object()


def _write(tmp_path: Path, *lines: Any, name: str = "cases.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line, ensure_ascii=False)) + "\n"
                            for line in lines), encoding="utf-8")
    return path


def _error(path: Path) -> str:
    with pytest.raises(DatasetError) as info:
        load_jsonl(path)
    return str(info.value)


# --------------------------------------------------------------------------- good files


def test_good_file_loads_every_form(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        _record(),
        "",  # blank lines are skipped
        _record(id="w2", question=[{"role": "system", "content": "Be brief."},
                                   {"role": "user", "content": "Weather in Osaka?"}], language=_DROP, group="g"),
        _record(id="w3", question="Tell me a joke.", ground_truth=_DROP, source_note="kept in extra"),
        _record(id="c1", question="Convert 5 EUR to USD and to JPY.", function=[WEATHER, CONVERT],
                ground_truth=[{"currency.convert": {"amount": [5.0], "from_currency": ["EUR"],
                                                    "to_currency": ["USD"]}},
                              {"currency.convert": {"amount": [5.0], "from_currency": ["EUR"],
                                                    "to_currency": ["JPY"]}}]),
        _record(id=7, question="Convert 5 EUR.", function=[CONVERT], category="simple",
                ground_truth=[{"currency.convert": {"amount": [5.0], "from_currency": ["EUR"],
                                                    "to_currency": ["USD"]}}]),
    )
    ds = load_dataset(f"jsonl:{path}")
    assert ds.name == f"jsonl:{path}"
    assert [c.id for c in ds] == ["w1", "w2", "w3", "c1", "7"]
    w1, w2, w3, c1, c7 = ds.cases
    assert (w1.category, w1.language, w1.group, w1.source) == ("simple", "de", "w1", "jsonl")
    assert w1.turns == ({"role": "user", "content": "Wie ist das Wetter in München?"},)
    assert w1.functions == (WEATHER,)
    assert (w2.language, w2.group, len(w2.turns), w2.query) == ("en", "g", 2, "Weather in Osaka?")
    assert (w3.category, w3.ground_truth, w3.extra) == ("irrelevance", (), {"source_note": "kept in extra"})
    assert c1.category == "parallel_multiple"
    assert c7.category == "simple"
    assert ds.languages == ("de", "en")


def test_category_is_inferred(tmp_path: Path) -> None:
    call = {"currency.convert": {"amount": [1.0], "from_currency": ["EUR"], "to_currency": ["USD"]}}
    path = _write(
        tmp_path,
        _record(id="s", function=[CONVERT], ground_truth=[call]),
        _record(id="m", function=[WEATHER, CONVERT], ground_truth=[call]),
        _record(id="p", function=[CONVERT], ground_truth=[call, call]),
        _record(id="pm", function=[WEATHER, CONVERT], ground_truth=[call, call]),
        _record(id="i", function=[CONVERT], ground_truth=[]),
    )
    assert [c.category for c in load_jsonl(path)] == ["simple", "multiple", "parallel", "parallel_multiple",
                                                       "irrelevance"]


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(_record()).encode())
    assert load_jsonl(path)[0].id == "w1"


# --------------------------------------------------------------------------- bad files


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('{"id": "x", "question": ', "cases.jsonl:2: not valid JSON"),
        ("[1, 2]", "cases.jsonl:2: must be a JSON object"),
        (_record(id=_DROP), "cases.jsonl:2: id: is missing"),
        (_record(question=_DROP), "cases.jsonl:2: question: is missing"),
        (_record(function=_DROP), "cases.jsonl:2: function: is missing"),
        (_record(question=5), "cases.jsonl:2: question: must be a non-empty list of turns"),
        (_record(question=[[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]]),
         "cases.jsonl:2: question: has 2 turns"),
        (_record(question=[[{"role": "usr", "content": "a"}]]),
         "cases.jsonl:2: question[0][0].role: must be one of system, user, assistant; got 'usr'. Did you mean 'user'?"),
        (_record(question=[[{"role": "user", "content": 3}]]),
         "cases.jsonl:2: question[0][0].content: must be a string"),
        (_record(question=[[{"role": "system", "content": "x"}]]), "cases.jsonl:2: question[0]: has no user message"),
        (_record(function=WEATHER), "cases.jsonl:2: function: must be a list of function objects; wrap"),
        (_record(function=[{"description": "x", "parameters": WEATHER["parameters"]}], ground_truth=[]),
         "cases.jsonl:2: function[0].name: is missing"),
        (_record(function=[{"name": "f", "parameters": {"properties": {}}}], ground_truth=[]),
         "cases.jsonl:2: function[0].parameters.type: is missing"),
        (_record(function=[{"name": "f", "parameters": {"type": "dict"}}], ground_truth=[]),
         "cases.jsonl:2: function[0].parameters.properties: is missing"),
        (_record(function=[{"name": "f", "parameters": {"type": "dict", "properties": {"a": {}}}}], ground_truth=[]),
         "cases.jsonl:2: function[0].parameters.properties.a: needs a \"type\""),
        (_record(function=[{"name": "f", "parameters": {"type": "dict", "properties": {}, "required": ["a"]}}],
                 ground_truth=[]),
         "cases.jsonl:2: function[0].parameters.required: names 'a', which is not in properties"),
        (_record(function=[WEATHER, WEATHER]), "cases.jsonl:2: function[1].name: 'weather.get_current' appears twice"),
        (_record(ground_truth=[{"weather.get_curent": {"city": ["Rom"]}}]),
         "cases.jsonl:2: ground_truth[0]: calls 'weather.get_curent', which is not in this record's function list. "
         "Did you mean 'weather.get_current'?"),
        (_record(ground_truth=[{"weather.get_current": {"citty": ["Rom"], "city": ["Rom"]}}]),
         "cases.jsonl:2: ground_truth[0].weather.get_current.citty: is not a parameter of weather.get_current. "
         "Did you mean 'city'?"),
        (_record(ground_truth=[{"weather.get_current": {"city": "Rom"}}]),
         'cases.jsonl:2: ground_truth[0].weather.get_current.city: must be a non-empty list of acceptable values '
         '(write ["Rom"] for one value'),
        (_record(ground_truth=[{"weather.get_current": {"unit": ["celsius"]}}]),
         "cases.jsonl:2: ground_truth[0].weather.get_current: omits required parameter 'city'"),
        (_record(ground_truth={"weather.get_current": {"city": ["Rom"]}}),
         "cases.jsonl:2: ground_truth: must be a list"),
        (_record(ground_truth=[{"a": {}, "b": {}}]),
         "cases.jsonl:2: ground_truth[0]: must be an object with exactly one key"),
        (_record(category="simpel"), "cases.jsonl:2: category: must be one of"),
        (_record(category="irrelevance"), "cases.jsonl:2: category: is 'irrelevance', so ground_truth must have empty"),
        (_record(category="simple", ground_truth=[]),
         "cases.jsonl:2: category: is 'simple', so ground_truth must have at"),
        (_record(language=""), "cases.jsonl:2: language: must be a language code string"),
        (_record(group=3), "cases.jsonl:2: group: must be a string"),
        (_record(id="w0"), None),  # control: a valid second line loads
    ],
)
def test_bad_line_is_reported_with_file_line_and_field(tmp_path: Path, line: Any, expected: str | None) -> None:
    path = _write(tmp_path, _record(id="w0"), line)
    if expected is None:
        with pytest.raises(DatasetError, match="'w0' is already used on line 1"):
            load_jsonl(path)
        return
    message = _error(path)
    assert expected in message, message
    assert message.startswith(f"jsonl dataset {path} has 1 problem ("), message
    assert "Traceback" not in message


def test_all_problems_are_reported_together(tmp_path: Path) -> None:
    path = _write(tmp_path, _record(), "not json", _record(id="b", function=_DROP), _record(id="w1"),
                  _record(id="c", question=[[{"role": "bot", "content": 1}]]))
    message = _error(path)
    assert "has 5 problems" in message
    for fragment in (":2: not valid JSON", ":3: function: is missing", ":4: id: 'w1' is already used on line 1",
                     ":5: question[0][0].role", ":5: question[0][0].content"):
        assert fragment in message, message


def test_problem_list_stops_at_the_limit(tmp_path: Path) -> None:
    path = _write(tmp_path, *(["{broken"] * (MAX_PROBLEMS + 15)))
    message = _error(path)
    assert f"has {MAX_PROBLEMS}+ problems" in message
    assert message.count("not valid JSON") == MAX_PROBLEMS
    assert f"stopped after {MAX_PROBLEMS} problems" in message


def test_missing_empty_and_non_utf8_files(tmp_path: Path) -> None:
    assert "not found" in _error(tmp_path / "nope.jsonl")
    assert "is not a file" in _error(tmp_path)
    assert "holds no records" in _error(_write(tmp_path, "", "  "))
    bad = tmp_path / "latin1.jsonl"
    bad.write_bytes(json.dumps(_record()).encode() + b"\n" + '{"id": "é"}'.encode("latin-1") + b"\n")
    assert f"{bad}:2: not valid UTF-8" in _error(bad)


def test_hostile_lines_are_one_line_each_and_nan_in_a_ground_truth_is_refused(tmp_path: Path) -> None:
    good = json.dumps(_record()).encode()
    nan = json.dumps(_record(id="w2")).replace('"celsius"', "NaN")  # a NaN among the accepted values
    assert "NaN" in nan
    path = tmp_path / "hostile.jsonl"
    path.write_bytes(b"\n".join([good, b"[" * 100_000 + b"]" * 100_000, b'{"id": ' + b"1" * 5000 + b"}",
                                 b'{"id": "\xff"}', nan.encode()]) + b"\n")
    message = _error(path)
    assert "Traceback" not in message
    for number, fragment in ((2, "nested more than"), (3, "a number has 5000 characters"),
                             (4, "not valid UTF-8"), (5, "NaN is not a JSON number")):
        assert f"{path}:{number}: {fragment}" in message
    assert f"{path}:1:" not in message


# --------------------------------------------------------------------------- round trip

_names = st.from_regex(r"[a-z][a-z0-9_]{0,8}(\.[a-z][a-z0-9_]{0,8})?", fullmatch=True)
_text = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30)
_scalar_for = {
    "string": _text,
    "integer": st.integers(-10**6, 10**6),
    "float": st.floats(allow_nan=False, allow_infinity=False, width=64),
    "boolean": st.booleans(),
    "array": st.lists(st.integers(0, 9), max_size=3),
}


@st.composite
def _function_and_calls(draw: st.DrawFn, name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    params = draw(st.dictionaries(_names, st.sampled_from(sorted(_scalar_for)), min_size=1, max_size=4))
    required = draw(st.lists(st.sampled_from(sorted(params)), unique=True))
    fn = {"name": name, "description": draw(_text),
          "parameters": {"type": "dict", "properties": {p: {"type": t, "description": "d"} for p, t in params.items()},
                         "required": required}}
    calls = []
    for _ in range(draw(st.integers(0, 2))):
        args = {}
        for p, t in params.items():
            values = draw(st.lists(_scalar_for[t], min_size=1, max_size=3))
            if p not in required and draw(st.booleans()):
                values.append("")
            if p in required or draw(st.booleans()):
                args[p] = values
        calls.append({name: args})
    return fn, calls


@st.composite
def _cases(draw: st.DrawFn) -> list[Case]:
    out = []
    ids = draw(st.lists(st.text(min_size=1, max_size=12).filter(str.strip), min_size=1, max_size=4, unique=True))
    for case_id in ids:
        fn_names = draw(st.lists(_names, min_size=1, max_size=3, unique=True))
        functions, ground_truth = [], []
        for name in fn_names:
            fn, calls = draw(_function_and_calls(name))
            functions.append(fn)
            ground_truth.extend(calls)
        turns = [{"role": "user", "content": draw(_text)}]
        if draw(st.booleans()):
            turns.insert(0, {"role": "system", "content": draw(_text)})
        n_calls, n_fns = len(ground_truth), len(functions)
        category = ("irrelevance" if not n_calls else ("simple" if n_fns == 1 else "multiple") if n_calls == 1
                    else "parallel" if n_fns == 1 else "parallel_multiple")
        out.append(Case(id=case_id, category=category, turns=tuple(turns), functions=tuple(functions),
                        ground_truth=tuple(ground_truth), language=draw(st.sampled_from(["en", "de", "ja", "pt-BR"])),
                        group=draw(st.sampled_from([case_id, "g1"])), source="jsonl",
                        extra=draw(st.dictionaries(st.sampled_from(["note", "locale"]), _text, max_size=2))))
    return out


def _fields(case: Case) -> tuple[Any, ...]:
    return (case.id, case.category, case.turns, case.functions, case.ground_truth, case.language, case.group,
            case.source, dict(case.extra))


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cases=_cases())
def test_valid_records_round_trip(tmp_path: Path, cases: list[Case]) -> None:
    path = write_jsonl(cases, tmp_path / "rt.jsonl")
    loaded = load_jsonl(path)
    assert [_fields(c) for c in loaded] == [_fields(c) for c in cases]


def test_mini_round_trips_through_jsonl(tmp_path: Path) -> None:
    mini = load_dataset("mini")
    loaded = load_jsonl(write_jsonl(mini, tmp_path / "mini.jsonl"))
    assert [_fields(c)[:-2] for c in loaded] == [_fields(c)[:-2] for c in mini]
