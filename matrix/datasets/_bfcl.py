"""BFCL datasets, read from bfcl-eval's own data files (never copied into this repo).

``load_bfcl(category)`` turns one of bfcl-eval's single-turn AST categories, or
``format_sensitivity`` (the 200 entries of BFCL V4's format-sensitivity
study), into ``Case`` records. The files come from ``bfcl_data`` (a wheel, a
folder or a gorilla checkout), else ``$PROMPTGRID_BFCL_DATA``, else the
installed bfcl-eval package; see ``promptgrid.templates._bfcl_source``.

Function docs are pre-processed the way bfcl-eval 2026.3.23's generation
pipeline does before it builds a prompt, so that rendered prompts match the
leaderboard's byte for byte:

* every entry: bfcl-eval's ``load_dataset_entry`` appends the language hint
  " Note that the provided function is in Python 3 syntax." to each function
  description (the sentence the BFCL V4 blog prints in its JSON doc example);
* format-sensitivity entries: ``load_format_sensitivity_test_cases`` loads each
  listed entry through ``load_dataset_entry`` of its own category (hint #1) and
  the result goes through ``load_dataset_entry('format_sensitivity')``'s hint
  step again (hint #2), so the hint appears TWICE. Nothing else touches the
  docs before ``system_prompt_pre_processing_chat_model`` builds the prompt.

The format-sensitivity entries come in bfcl-eval's order: categories in the
order of ``BFCL_v4_format_sensitivity.json``, and within a category in the
order of the category's data file (not the order of the id list).

Java and JavaScript categories are not offered: bfcl-eval rewrites their
parameter types and descriptions with its own prose, which is not reproduced here.
"""

from __future__ import annotations

import os
import re
from typing import Any

from promptgrid.errors import DatasetError, closest
from promptgrid.records import Case
from promptgrid.safeio import parse_json_line, read_json_lines
from promptgrid.templates import BFCL_INSTALL_HINT, BfclSource, find_bfcl

__all__ = ["BFCL_CATEGORIES", "FORMAT_SENSITIVITY", "bfcl_categories", "load_bfcl"]

FORMAT_SENSITIVITY = "format_sensitivity"
# bfcl-eval category -> promptgrid Case.category (live_* share the non-live rules).
BFCL_CATEGORIES: dict[str, str] = {
    "simple_python": "simple",
    "multiple": "multiple",
    "parallel": "parallel",
    "parallel_multiple": "parallel_multiple",
    "live_simple": "simple",
    "live_multiple": "multiple",
    "live_parallel": "parallel",
    "live_parallel_multiple": "parallel_multiple",
    "irrelevance": "irrelevance",
    "live_irrelevance": "irrelevance",
}
_PYTHON_HINT = " Note that the provided function is in Python 3 syntax."
_DATA_FILE = re.compile(r"^(BFCL_v(\d+))_(\w+)\.json$")


def _source(bfcl_data: str | os.PathLike[str] | None) -> BfclSource:
    source = find_bfcl(bfcl_data, error=DatasetError)
    if source is None:
        raise DatasetError(f"BFCL datasets are read from bfcl-eval's data files, and no bfcl-eval was found. "
                           f"{BFCL_INSTALL_HINT}.")
    return source


def _prefix(source: BfclSource) -> tuple[str, set[str]]:
    """The newest ``BFCL_vN`` prefix in the data folder and the categories it has files for."""
    found: dict[str, tuple[int, set[str]]] = {}
    for name in source.list_dir("data"):
        match = _DATA_FILE.match(name)
        if match:
            found.setdefault(match.group(1), (int(match.group(2)), set()))[1].add(match.group(3))
    if not found:
        raise DatasetError(f"{source.describe()}: no BFCL_v*_<category>.json data files found. {BFCL_INSTALL_HINT}.")
    prefix = max(found, key=lambda p: found[p][0])
    return prefix, found[prefix][1]


def bfcl_categories(bfcl_data: str | os.PathLike[str] | None = None) -> list[str]:
    """The categories ``load_bfcl`` can load from this bfcl-eval, format_sensitivity last."""
    _prefix_name, present = _prefix(_source(bfcl_data))
    out = [c for c in BFCL_CATEGORIES if c in present]
    if FORMAT_SENSITIVITY in present:
        out.append(FORMAT_SENSITIVITY)
    return out


def _read_jsonl(source: BfclSource, relpath: str) -> list[dict[str, Any]]:
    """The entries of a bfcl-eval data file, read line by line within ``safeio``'s bounds (line and file size,
    an archive member's expanded size, nesting depth, finite numbers: NaN never reaches a prompt)."""
    where = source.where(relpath)
    entries = []
    try:
        with source.open_binary(relpath) as handle:
            for line in read_json_lines(handle, name=where):
                if line.error is not None:
                    raise DatasetError(f"{where}:{line.number}: {line.error}.")
                if not isinstance(line.value, dict):
                    raise DatasetError(f"{where}:{line.number}: not a JSON object; point --bfcl-data at an "
                                       "unmodified bfcl-eval.")
                entries.append(line.value)
    except FileNotFoundError:
        raise DatasetError(f"{source.describe()}: {relpath} is missing. {BFCL_INSTALL_HINT}.") from None
    except OSError as exc:
        raise DatasetError(f"cannot read {where}: {exc.strerror or exc}.") from None
    return entries


def _with_hint(functions: list[dict[str, Any]], times: int) -> tuple[dict[str, Any], ...]:
    out = []
    for fn in functions:
        fn = dict(fn)
        fn["description"] = fn.get("description", "") + _PYTHON_HINT * times
        out.append(fn)
    return tuple(out)



def _entry_problem(entry: dict[str, Any]) -> str | None:
    """What is wrong with the shape of a single-turn entry's ``question`` and ``function``, or ``None``."""
    first = entry["question"][0]
    if not isinstance(first, list) or not all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
            for m in first):
        return 'question[0]: must be a list of messages {"role": ..., "content": text}'
    functions = entry.get("function", [])
    if not isinstance(functions, list):
        return f"function: must be a list of function docs, not {type(functions).__name__}"
    for index, doc in enumerate(functions):
        if not isinstance(doc, dict) or not isinstance(doc.get("name"), str) or \
                not isinstance(doc.get("parameters", {}), dict) or not isinstance(doc.get("description", ""), str):
            return (f"function[{index}]: must be a function doc {{\"name\": text, \"description\": text, "
                    f"\"parameters\": {{...}}}}")
    return None


def _cases(source: BfclSource, prefix: str, category: str, ids: set[str] | None, hints: int,
           collection: str) -> list[Case]:
    entries = _read_jsonl(source, f"data/{prefix}_{category}.json")
    if ids is not None:
        entries = [e for e in entries if e.get("id") in ids]
    answers: dict[str, Any] = {}
    if BFCL_CATEGORIES[category] != "irrelevance":
        answers = {a["id"]: a.get("ground_truth", []) for a in
                   _read_jsonl(source, f"data/possible_answer/{prefix}_{category}.json")}
    where = source.where(f"data/{prefix}_{category}.json")
    cases = []
    for entry in entries:
        entry_id = entry.get("id")
        question = entry.get("question")
        if not isinstance(entry_id, str) or not isinstance(question, list) or not question:
            raise DatasetError(f"{where}: entry {entry_id!r} has no id or no question.")
        problem = _entry_problem(entry)
        if problem:
            raise DatasetError(f"{where}: entry {entry_id!r}: {problem}; point --bfcl-data at an unmodified "
                               "bfcl-eval.")
        if BFCL_CATEGORIES[category] != "irrelevance" and entry_id not in answers:
            raise DatasetError(f"{where}: entry {entry_id} has no possible answer in possible_answer/.")
        extra: dict[str, Any] = {"bfcl_category": category}
        if collection != category:
            extra["bfcl_collection"] = collection
        cases.append(Case(
            id=entry_id,
            category=BFCL_CATEGORIES[category],
            turns=tuple(dict(m) for m in question[0]),
            functions=_with_hint(entry.get("function", []), hints),
            ground_truth=tuple(answers.get(entry_id, ())),
            language="en",
            group=entry_id,
            source=f"bfcl:{collection}",
            extra=extra,
        ))
    return cases


def load_bfcl(category: str, bfcl_data: str | os.PathLike[str] | None = None) -> tuple[Case, ...]:
    """The cases of one bfcl-eval category, or of ``format_sensitivity`` (200 entries).

    Raises ``DatasetError`` when bfcl-eval cannot be found (with how to get it),
    for an unknown category (with a suggestion) or for malformed data.
    """
    known = [*BFCL_CATEGORIES, FORMAT_SENSITIVITY]
    if category not in known:
        hint = ""
        if category in ("simple_java", "simple_javascript"):
            hint = " Java and JavaScript categories are not supported (bfcl-eval rewrites their docs)."
        raise DatasetError(f"unknown BFCL category {category!r}.{closest(category, known)}{hint} "
                           f"Categories: {', '.join(known)}.")
    source = _source(bfcl_data)
    prefix, _present = _prefix(source)
    if category != FORMAT_SENSITIVITY:
        return tuple(_cases(source, prefix, category, None, 1, category))

    relpath = f"data/{prefix}_{FORMAT_SENSITIVITY}.json"
    try:
        listing = parse_json_line(source.read_text(relpath))  # bounded: depth, finite numbers
    except FileNotFoundError:
        raise DatasetError(f"{source.describe()}: {relpath} is missing (bfcl-eval before V4?). "
                           f"{BFCL_INSTALL_HINT}.") from None
    except ValueError as exc:  # not JSON or not UTF-8 (that message names the file)
        message = str(exc)
        where = source.where(relpath)
        raise DatasetError(message if message.startswith(where) else f"{where}: {message}.") from None
    if not isinstance(listing, dict) or not all(isinstance(v, list) for v in listing.values()):
        raise DatasetError(f"{source.where(relpath)}: not a JSON object of id lists; point --bfcl-data at an "
                           "unmodified bfcl-eval.")
    cases: list[Case] = []
    for sub, ids in listing.items():
        if not ids:
            continue
        if sub not in BFCL_CATEGORIES:
            raise DatasetError(f"{source.describe()}/{relpath}: category {sub!r} is not supported here.")
        cases.extend(_cases(source, prefix, sub, set(ids), 2, FORMAT_SENSITIVITY))
    return tuple(cases)
