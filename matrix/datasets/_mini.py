"""The built-in ``mini`` dataset: small, multilingual, localized.

46 base cases (simple, multiple, parallel, parallel_multiple, irrelevance),
each written in nine languages. The entities are local to the language
(Ticket-Bench's point): the German user books a train from München, the
Japanese user converts yen in 大阪, the Brazilian user pays in reais in São
Paulo. So each language version carries its own ground truth, with both the
native and the usual English spelling of a place accepted where a model could
reasonably write either.

Package data (written for promptgrid, not copied from any benchmark):

* ``data/mini_functions.json``: every function (BFCL JSON-schema form, English
  descriptions) once, by name. The translation layer translates these
  descriptions, so keep them stable.
* ``data/mini_cases.json``: per base case its id (the case group), category,
  the names of the functions offered, and per language the query and the
  ground truth (BFCL possible-answer form, every parameter listed; ``""``
  among the acceptable values means "may be omitted").

Case ids are ``<base id>-<lang>``; cases come by base case, then language in
``MINI_LANGUAGES`` order.
"""

from __future__ import annotations

import copy
import difflib
import json
from functools import lru_cache
from importlib import resources
from typing import Any

from promptgrid.errors import DatasetError
from promptgrid.records import Case

__all__ = ["MINI_LANGUAGES", "describe_mini", "load_mini", "mini_functions", "parse_languages"]

MINI_LANGUAGES = ("en", "de", "es", "fr", "it", "ja", "zh", "hi", "pt")
_DATA = "promptgrid.matrix.datasets"


def _read_json(name: str) -> Any:
    try:
        text = resources.files(_DATA).joinpath("data").joinpath(name).read_text(encoding="utf-8")
    except FileNotFoundError:  # pragma: no cover - a broken install
        raise DatasetError(
            f"the mini dataset file data/{name} is missing from the installed package; "
            "reinstall promptgrid (pip install -e . from a checkout)."
        ) from None
    return json.loads(text)


@lru_cache(maxsize=1)
def _functions() -> dict[str, dict[str, Any]]:
    return {f["name"]: f for f in _read_json("mini_functions.json")}


@lru_cache(maxsize=1)
def _base_cases() -> tuple[dict[str, Any], ...]:
    return tuple(_read_json("mini_cases.json")["cases"])


def describe_mini() -> str:
    """One line for listings: how many base cases, of which categories, in which languages."""
    base = _base_cases()
    categories = ", ".join(dict.fromkeys(b["category"] for b in base))
    return (f"built-in: {len(base)} everyday function-calling cases ({categories}), "
            f"each in {', '.join(MINI_LANGUAGES)} with localized entities")


def mini_functions() -> dict[str, dict[str, Any]]:
    """Every function of the mini dataset by name (a deep copy: safe to modify)."""
    return copy.deepcopy(_functions())


# Codes people type for these languages (country codes, mostly): used for suggestions only.
_ALIASES = {"jp": "ja", "cn": "zh", "br": "pt", "ge": "de", "sp": "es", "in": "hi", "us": "en", "uk": "en",
            "gb": "en", "ch": "zh", "fra": "fr", "ita": "it", "deu": "de", "ger": "de", "esp": "es", "por": "pt",
            "jpn": "ja", "chi": "zh", "zho": "zh", "hin": "hi", "eng": "en"}


def _suggest(code: str) -> str:
    if code in _ALIASES:
        return _ALIASES[code]
    near = difflib.get_close_matches(code, MINI_LANGUAGES, n=1, cutoff=0.5)  # same rule as closest()
    return near[0] if near else ""


def parse_languages(spec: str) -> tuple[str, ...]:
    """``"de, ja"`` -> ``("de", "ja")``, each code checked against MINI_LANGUAGES.

    Region-qualified codes (``pt-BR``, ``zh_CN``) mean their language.
    """
    codes = [part.strip().lower().replace("_", "-") for part in spec.split(",")]
    codes = [c.split("-", 1)[0] if "-" in c and c.split("-", 1)[0] in MINI_LANGUAGES else c for c in codes]
    if not all(codes):
        raise DatasetError(
            f"mini:{spec}: empty language code. Use comma-separated codes, e.g. mini:de,ja; "
            f"languages: {', '.join(MINI_LANGUAGES)}."
        )
    bad = [c for c in dict.fromkeys(codes) if c not in MINI_LANGUAGES]
    if bad:
        shown = ", ".join(f"{c!r}" + (f" (did you mean {_suggest(c)!r}?)" if _suggest(c) else "") for c in bad)
        raise DatasetError(
            f"mini has no language {shown}. Its languages are: {', '.join(MINI_LANGUAGES)}"
            " (comma-separated, e.g. mini:de,ja)."
        )
    return tuple(dict.fromkeys(codes))


def load_mini(languages: tuple[str, ...] | None = None) -> tuple[Case, ...]:
    """The mini cases, all languages or only ``languages`` (codes from MINI_LANGUAGES)."""
    wanted = MINI_LANGUAGES if languages is None else tuple(languages)
    functions = _functions()
    cases: list[Case] = []
    for base in _base_cases():
        offered = [functions[name] for name in base["functions"]]
        for lang in MINI_LANGUAGES:
            if lang not in wanted:
                continue
            version = base["languages"][lang]
            cases.append(
                Case(
                    id=f"{base['id']}-{lang}",
                    category=base["category"],
                    turns=({"role": "user", "content": version["query"]},),
                    # Copies: a consumer that edits a case's functions must not change its neighbours.
                    functions=tuple(copy.deepcopy(offered)),
                    ground_truth=tuple(copy.deepcopy(version["ground_truth"])),
                    language=lang,
                    group=base["id"],
                    source="mini",
                )
            )
    return tuple(cases)
