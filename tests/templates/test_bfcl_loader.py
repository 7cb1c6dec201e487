"""matrix.datasets._bfcl on a small made-up bfcl-eval data folder (runs without bfcl-eval).

Parity with bfcl-eval's own loading is in test_bfcl_parity.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from promptgrid.errors import DatasetError, InputLimitError
from promptgrid.matrix.datasets._bfcl import bfcl_categories, load_bfcl
from promptgrid.templates import BFCL_DATA_ENV, _bfcl_source

HINT = " Note that the provided function is in Python 3 syntax."


def _fn(name: str) -> dict[str, Any]:
    return {"name": name, "description": f"Do {name}.",
            "parameters": {"type": "dict", "properties": {"x": {"type": "integer", "description": "X."}},
                           "required": ["x"]}}


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


@pytest.fixture
def data(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    (d / "possible_answer").mkdir(parents=True)
    _write(d / "BFCL_v4_simple_python.json", [
        {"id": f"simple_python_{i}", "question": [[{"role": "user", "content": f"q{i}"}]], "function": [_fn(f"f{i}")]}
        for i in range(4)])
    _write(d / "possible_answer" / "BFCL_v4_simple_python.json", [
        {"id": f"simple_python_{i}", "ground_truth": [{f"f{i}": {"x": [i]}}]} for i in range(4)])
    _write(d / "BFCL_v4_live_multiple.json", [
        {"id": "live_multiple_0-0-0", "question": [[{"role": "system", "content": "Sys."},
                                                     {"role": "user", "content": "lq"}]],
         "function": [_fn("a"), _fn("b")]}])
    _write(d / "possible_answer" / "BFCL_v4_live_multiple.json", [
        {"id": "live_multiple_0-0-0", "ground_truth": [{"b": {"x": [1]}}]}])
    _write(d / "BFCL_v4_irrelevance.json", [
        {"id": "irrelevance_0", "question": [[{"role": "user", "content": "weather?"}]], "function": [_fn("c")]}])
    (d / "BFCL_v4_format_sensitivity.json").write_text(json.dumps({
        "simple_python": ["simple_python_3", "simple_python_1"],  # listed out of file order
        "multiple": [],
        "live_multiple": ["live_multiple_0-0-0"],
    }), encoding="utf-8")
    (d / "BFCL_v3_simple_python.json").write_text("", encoding="utf-8")  # an older version is ignored
    return d


def test_categories(data: Path) -> None:
    assert bfcl_categories(str(data)) == ["simple_python", "live_multiple", "irrelevance", "format_sensitivity"]


def test_plain_category(data: Path) -> None:
    cases = load_bfcl("simple_python", str(data))
    assert [c.id for c in cases] == [f"simple_python_{i}" for i in range(4)]
    c = cases[2]
    assert c.category == "simple" and c.language == "en" and c.group == c.id
    assert c.turns == ({"role": "user", "content": "q2"},)
    assert c.functions[0]["description"] == "Do f2." + HINT  # bfcl-eval's hint, once
    assert c.ground_truth == ({"f2": {"x": [2]}},)
    assert c.extra == {"bfcl_category": "simple_python"} and c.source == "bfcl:simple_python"


def test_irrelevance_has_no_ground_truth(data: Path) -> None:
    (case,) = load_bfcl("irrelevance", str(data))
    assert case.category == "irrelevance" and case.ground_truth == ()


def test_format_sensitivity(data: Path) -> None:
    cases = load_bfcl("format_sensitivity", str(data))
    assert [c.id for c in cases] == ["simple_python_1", "simple_python_3", "live_multiple_0-0-0"]  # file order
    assert all(fn["description"].endswith(HINT + HINT) for c in cases for fn in c.functions)  # hint twice
    live = cases[2]
    assert live.category == "multiple" and live.turns[0] == {"role": "system", "content": "Sys."}
    assert live.extra == {"bfcl_category": "live_multiple", "bfcl_collection": "format_sensitivity"}
    assert live.source == "bfcl:format_sensitivity"


def test_source_data_is_not_modified(data: Path) -> None:
    first = load_bfcl("format_sensitivity", str(data))
    again = load_bfcl("format_sensitivity", str(data))
    assert first[0].functions[0]["description"] == again[0].functions[0]["description"]


def test_errors(data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(DatasetError, match="unknown BFCL category 'simple_pyhton'. Did you mean 'simple_python'"):
        load_bfcl("simple_pyhton", str(data))
    with pytest.raises(DatasetError, match="Java and JavaScript categories are not supported"):
        load_bfcl("simple_java", str(data))
    with pytest.raises(DatasetError, match="BFCL_v4_parallel.json is missing"):
        load_bfcl("parallel", str(data))
    _write(data / "possible_answer" / "BFCL_v4_simple_python.json", [{"id": "simple_python_0", "ground_truth": []}])
    with pytest.raises(DatasetError, match="simple_python_1 has no possible answer"):
        load_bfcl("simple_python", str(data))
    (data / "BFCL_v4_irrelevance.json").write_text("{not json\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"BFCL_v4_irrelevance\.json:1: not valid JSON"):
        load_bfcl("irrelevance", str(data))


@pytest.mark.parametrize(("line", "message"), [
    ("[" * 100_000, r"BFCL_v4_irrelevance\.json:2: nested more than 200 levels deep\.$"),
    ('{"id": "irrelevance_1", "question": [[{"role": "user", "content": "q"}]], "function": [{"x": NaN}]}',
     r"BFCL_v4_irrelevance\.json:2: NaN is not a JSON number"),
    ('{"id": "irrelevance_1", "n": 1e999}', "out of range"),
    ("[1, 2]", r"BFCL_v4_irrelevance\.json:2: not a JSON object"),
])
def test_hostile_data_lines_are_one_error(data: Path, line: str, message: str) -> None:
    path = data / "BFCL_v4_irrelevance.json"
    path.write_text(path.read_text(encoding="utf-8") + line + "\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=message) as info:
        load_bfcl("irrelevance", str(data))
    assert "\n" not in str(info.value)


def test_hostile_format_sensitivity_listing(data: Path) -> None:
    listing = data / "BFCL_v4_format_sensitivity.json"
    for text, message in (("[" * 100_000, "nested more than 200"), ('{"simple_python": [NaN]}', "NaN is not"),
                          (b"\xff{}", "not UTF-8 text"), ("[]", "not a JSON object of id lists")):
        listing.write_bytes(text if isinstance(text, bytes) else text.encode())
        with pytest.raises(DatasetError, match=message):
            load_bfcl("format_sensitivity", str(data))


def test_an_archive_member_is_checked_for_its_expanded_size_before_reading(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import zipfile

    wheel = tmp_path / "bfcl_eval-0.0.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("bfcl_eval/constants/default_prompts.py", "X = 1\n")
        zf.writestr("bfcl_eval/data/BFCL_v4_irrelevance.json", b"\n" * 100_000)
    monkeypatch.setenv("PROMPTGRID_MAX_ARCHIVE_BYTES", "50000")
    with pytest.raises(InputLimitError, match=r"BFCL_v4_irrelevance\.json: expands to 100000 bytes, more than "
                                              r"50000 bytes.*PROMPTGRID_MAX_ARCHIVE_BYTES"):
        load_bfcl("irrelevance", str(wheel))
    monkeypatch.setenv("PROMPTGRID_MAX_ARCHIVE_BYTES", "100000")
    assert load_bfcl("irrelevance", str(wheel)) == ()


def test_not_found(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(BFCL_DATA_ENV, raising=False)
    monkeypatch.setattr(_bfcl_source, "_find_spec", lambda name: None)
    with pytest.raises(DatasetError, match=r"pip install --no-deps bfcl-eval.*--bfcl-data PATH"):
        load_bfcl("simple_python")
    monkeypatch.setenv(BFCL_DATA_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(DatasetError, match=f"{BFCL_DATA_ENV}: .*nowhere does not exist"):
        bfcl_categories()


@pytest.mark.parametrize(("change", "message"), [
    ({"question": [[5]]}, r"entry 'simple_python_1': question\[0\]: must be a list of messages"),
    ({"question": [5]}, r"entry 'simple_python_1': question\[0\]: must be a list of messages"),
    ({"function": "notalist"}, r"entry 'simple_python_1': function: must be a list of function docs, not str"),
    ({"function": [5, None]}, r"entry 'simple_python_1': function\[0\]: must be a function doc"),
    ({"function": [{"name": "f", "parameters": []}]}, r"function\[0\]: must be a function doc"),
])
def test_wrong_shapes_in_bfcl_data_are_one_error_naming_the_entry_and_field(
        data: Path, change: dict[str, Any], message: str) -> None:
    path = data / "BFCL_v4_simple_python.json"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    rows[1].update(change)
    _write(path, rows)
    with pytest.raises(DatasetError, match=message) as info:
        load_bfcl("simple_python", str(data))
    assert str(info.value).startswith(str(path)) and "unmodified bfcl-eval" in str(info.value)
