"""load_dataset / list_datasets dispatch and the Dataset record."""

from __future__ import annotations

import inspect
import sys
import types
from typing import Any

import pytest

import promptgrid.matrix.datasets as datasets
from promptgrid.errors import DatasetError
from promptgrid.matrix.datasets import MINI_LANGUAGES, SPEC_FORMS, Dataset, list_datasets, load_dataset
from promptgrid.records import Case
from support.builders import make_case

_BFCL = "promptgrid.matrix.datasets._bfcl"


def test_all_is_complete() -> None:
    public = {name for name, value in vars(datasets).items()
              if not name.startswith("_") and not inspect.ismodule(value)
              and getattr(value, "__module__", datasets.__name__).startswith(datasets.__name__)}
    assert public <= set(datasets.__all__), public - set(datasets.__all__)
    for name in datasets.__all__:
        assert hasattr(datasets, name), name


# --------------------------------------------------------------------------- specs


@pytest.mark.parametrize(
    ("spec", "fragments"),
    [
        ("minni", ["unknown dataset 'minni'", "Did you mean 'mini'?", *SPEC_FORMS]),
        ("bfc:simple_python", ["Did you mean 'bfcl'?", "jsonl:PATH"]),
        ("cases.jsonl", ["Did you mean 'jsonl:cases.jsonl'?"]),
        ("", ["no dataset given", "mini:LANG"]),
        ("mini:xx,jp", ["'xx'", "'jp' (did you mean 'ja'?)", ", ".join(MINI_LANGUAGES)]),
        ("mini:", ["empty language code"]),
        ("bfcl:", ["bfcl: needs a category"]),
        ("jsonl:", ["jsonl: needs a path"]),
        ("jsonl:/does/not/exist.jsonl", ["not found"]),
    ],
)
def test_bad_specs_say_what_to_do(spec: str, fragments: list[str]) -> None:
    with pytest.raises(DatasetError) as info:
        load_dataset(spec)
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)
    assert info.value.exit_code == 2


def test_mini_language_filter_forms() -> None:
    assert load_dataset(" mini ").name == "mini"
    assert load_dataset("mini:DE, pt-BR,de").name == "mini:de,pt"
    assert load_dataset("mini:zh_CN").languages == ("zh",)


def test_bfcl_specs_dispatch_lazily(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, Any]] = []

    def load_bfcl(category: str, bfcl_data: str | None = None) -> tuple[Case, ...]:
        calls.append((category, bfcl_data))
        return (make_case(case_id=f"{category}_0"),)

    fake = types.ModuleType(_BFCL)
    fake.load_bfcl = load_bfcl  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, _BFCL, fake)
    ds = load_dataset("bfcl:format_sensitivity", bfcl_data="/data/gorilla")
    assert ds.name == "bfcl:format_sensitivity" and ds.case("format_sensitivity_0")
    load_dataset("bfcl:live_parallel")
    assert calls == [("format_sensitivity", "/data/gorilla"), ("live_parallel", None)]


def test_list_datasets_with_and_without_bfcl_data(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType(_BFCL)
    fake.bfcl_categories = lambda bfcl_data=None: ["simple_python", "live_parallel", "format_sensitivity"]  # type: ignore[attr-defined]
    fake.FORMAT_SENSITIVITY = "format_sensitivity"  # type: ignore[attr-defined]
    fake.BFCL_CATEGORIES = {"simple_python": "simple", "live_parallel": "parallel"}  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, _BFCL, fake)
    listing = list_datasets()
    assert list(listing) == ["mini", "mini:LANG[,LANG...]", "bfcl:simple_python", "bfcl:live_parallel",
                             "bfcl:format_sensitivity", "jsonl:PATH"]
    assert "46" in listing["mini"] and "200" in listing["bfcl:format_sensitivity"]
    assert "scored as parallel" in listing["bfcl:live_parallel"]
    assert "scored as simple" in listing["bfcl:simple_python"]

    def no_data(bfcl_data: str | None = None) -> list[str]:
        raise DatasetError("no bfcl-eval was found. Install it with: pip install --no-deps bfcl-eval")

    fake.bfcl_categories = no_data  # type: ignore[attr-defined]
    listing = list_datasets(bfcl_data="/nowhere")
    assert [k for k in listing if k.startswith("bfcl")] == ["bfcl:<category>"]
    assert "pip install --no-deps bfcl-eval" in listing["bfcl:<category>"]
    assert "jsonl:PATH" in listing


def test_installed_bfcl_eval_is_listed_and_loads() -> None:
    pytest.importorskip("bfcl_eval")
    listing = list_datasets()
    if "bfcl:<category>" in listing:
        pytest.skip(f"bfcl-eval data not usable here: {listing['bfcl:<category>']}")
    assert "bfcl:simple_python" in listing and "bfcl:format_sensitivity" in listing
    ds = load_dataset("bfcl:simple_python")
    assert len(ds) > 0 and ds.categories == ("simple",)


# --------------------------------------------------------------------------- Dataset


def test_dataset_rejects_duplicate_ids() -> None:
    with pytest.raises(DatasetError, match="two cases with id 'a'"):
        Dataset(name="x", cases=(make_case(case_id="a"), make_case(case_id="a")))


def test_case_lookup_suggests_close_ids() -> None:
    ds = Dataset(name="x", cases=(make_case(case_id="weather_01-de"), make_case(case_id="weather_02-de")))
    assert ds.case("weather_02-de").id == "weather_02-de"
    with pytest.raises(DatasetError, match=r"no case 'weather_1-de'\. Did you mean 'weather_01-de'\?"):
        ds.case("weather_1-de")


def test_select_filters_in_dataset_order() -> None:
    cases = (make_case(case_id="a-en", language="en", group="a"),
             make_case(case_id="a-de", language="de", group="a"),
             make_case(case_id="b-en", language="en", category="irrelevance", group="b"),
             make_case(case_id="b-de", language="de", category="irrelevance", group="b"))
    ds = Dataset(name="x", cases=cases)
    assert ds.languages == ("en", "de") and ds.groups == ("a", "b")
    assert [c.id for c in ds.select(["b-de", "a-en"])] == ["a-en", "b-de"]
    assert [c.id for c in ds.select(groups=["b"])] == ["b-en", "b-de"]
    assert [c.id for c in ds.select(languages="de")] == ["a-de", "b-de"]
    assert [c.id for c in ds.select(categories=["irrelevance"], languages=["en"])] == ["b-en"]
    # Several languages: one case per question first (languages take turns), then the rest; dataset order.
    assert [c.id for c in ds.select(limit=2)] == ["a-en", "b-de"]
    assert [c.id for c in ds.select(limit=3)] == ["a-en", "a-de", "b-de"]
    assert [c.id for c in ds.select(languages="de", limit=1)] == ["a-de"]  # one language: the first N
    assert len(ds.select(limit=0)) == 0
    assert ds.select(limit=1).name == "x"


@pytest.mark.parametrize("spec", ["mini", "mini:de,ja,zh"])
def test_limit_on_multilingual_mini_picks_distinct_questions(spec: str) -> None:
    ds = load_dataset(spec)
    langs = ds.languages
    picked = ds.select(limit=len(langs) + 1).cases
    assert len({c.group for c in picked}) == len(picked)  # N distinct source questions
    assert [c.language for c in picked] == [*langs, langs[0]]  # each language in turn
    assert [c.id for c in picked] == [c.id for c in ds.cases if c in picked]  # dataset order
    assert len(ds.select(limit=10_000)) == len(ds)


def test_limit_on_one_language_keeps_the_first_cases() -> None:
    ds = load_dataset("mini:en")
    assert ds.select(limit=5).cases == ds.cases[:5]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"case_ids": ["a-en", "zz", "a-fr"]}, "no case 'zz', 'a-fr' (did you mean 'a-en'?)"),
        ({"languages": ["fr"]}, "no language 'fr'. It has: en, de."),
        ({"categories": ["simpel"]}, "no category 'simpel' (did you mean 'simple'?)"),
        ({"groups": ["c"]}, "no group 'c'"),
        ({"limit": -1}, "limit must be a whole number"),
        ({"limit": True}, "limit must be a whole number"),
    ],
)
def test_select_reports_every_unknown_value(kwargs: dict[str, Any], message: str) -> None:
    ds = Dataset(name="x", cases=(make_case(case_id="a-en", language="en"), make_case(case_id="a-de", language="de")))
    with pytest.raises(DatasetError) as info:
        ds.select(**kwargs)
    assert message in str(info.value), str(info.value)


def test_select_on_mini_by_group() -> None:
    mini = load_dataset("mini")
    weather = mini.select(groups=["simple_weather_01"])
    assert [c.language for c in weather] == list(MINI_LANGUAGES)
    assert {c.group for c in weather} == {"simple_weather_01"}
