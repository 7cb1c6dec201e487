"""Datasets: the cases a run sends to a model.

``load_dataset(spec)`` understands these specs::

    mini                     built-in multilingual set, all 9 languages
    mini:de,ja               the same, only these languages
    bfcl:<category>          one of bfcl-eval's categories (read from an installed bfcl-eval,
                             a wheel, a folder or a gorilla checkout: bfcl_data / $PROMPTGRID_BFCL_DATA)
    bfcl:format_sensitivity  the 200 entries of BFCL V4's format-sensitivity study
    jsonl:PATH               your own cases, one JSON object per line (docs/datasets.md)

Every loader returns ``Case`` records (promptgrid.records) inside a
``Dataset``; the BFCL loader (and the templates package it reads bfcl-eval's
files with) is imported only for ``bfcl:`` specs.
"""

from __future__ import annotations

import os

from promptgrid.errors import DatasetError, PromptgridError, closest

from ._jsonl import MAX_PROBLEMS, case_to_record, load_jsonl, write_jsonl
from ._mini import MINI_LANGUAGES, mini_functions
from ._mini import describe_mini as _describe_mini
from ._mini import load_mini as _load_mini
from ._mini import parse_languages as _parse_languages
from ._model import Dataset

__all__ = [
    "MAX_PROBLEMS",
    "MINI_LANGUAGES",
    "SPEC_FORMS",
    "Dataset",
    "case_to_record",
    "list_datasets",
    "load_dataset",
    "load_jsonl",
    "mini_functions",
    "write_jsonl",
]

# The forms a dataset spec can take, for error messages and `promptgrid datasets`.
SPEC_FORMS = ("mini", "mini:LANG[,LANG...]", "bfcl:<category>", "bfcl:format_sensitivity", "jsonl:PATH")
_KINDS = ("mini", "bfcl", "jsonl")


def _unknown_spec(spec: str) -> DatasetError:
    if spec.endswith(".jsonl"):
        hint = f" Did you mean 'jsonl:{spec}'?"
    else:
        hint = closest(spec.split(":", 1)[0], _KINDS)
    return DatasetError(f"unknown dataset {spec!r}.{hint} Valid forms: {', '.join(SPEC_FORMS)}.")


def _conversation_spec(spec: str) -> DatasetError:
    """The error for a conversation dataset given where a single-turn one is read (``promptgrid.matrix.conversations``
    loads and runs it; this package does not import it: conversations build on datasets, not the other way)."""
    return DatasetError(f"{spec!r} is a conversation dataset (several user turns, the calls run against stateful "
                        f"APIs), not a single-turn one. Run it with promptgrid run GRID --dataset {spec} or "
                        f"pg.run(GRID, {spec!r}, models=[...]); load it with "
                        f"promptgrid.matrix.conversations.load_conversations({spec!r}). promptgrid datasets lists "
                        "both kinds.")


def load_dataset(spec: str, *, bfcl_data: str | os.PathLike[str] | None = None) -> Dataset:
    """Load the dataset a spec names (see the module docstring for the forms).

    A conversation dataset (``mini-mt``, ``bfcl:multi_turn_*``) is a ``DatasetError`` saying how to run it.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise DatasetError(f"no dataset given. Valid forms: {', '.join(SPEC_FORMS)}.")
    spec = spec.strip()
    kind, sep, arg = spec.partition(":")
    if kind.strip() == "mini-mt" or (kind == "bfcl" and arg.strip().startswith("multi_turn")):
        raise _conversation_spec(spec)
    if kind == "mini":
        if not sep:
            return Dataset(name="mini", cases=_load_mini(), description=_describe_mini())
        languages = _parse_languages(arg)
        return Dataset(name=f"mini:{','.join(languages)}", cases=_load_mini(languages),
                       description=_describe_mini() + f" (here: {', '.join(languages)})")
    if kind == "bfcl":
        category = arg.strip()
        if not category:
            raise DatasetError("bfcl: needs a category, e.g. bfcl:simple_python or bfcl:format_sensitivity. "
                               "List them with: promptgrid datasets.")
        from ._bfcl import load_bfcl

        cases = load_bfcl(category, bfcl_data=None if bfcl_data is None else str(bfcl_data))
        return Dataset(name=f"bfcl:{category}", cases=tuple(cases),
                       description=f"BFCL category {category} (read from bfcl-eval's data files)")
    if kind == "jsonl":
        if not arg.strip():
            raise DatasetError("jsonl: needs a path, e.g. jsonl:my_cases.jsonl (schema in docs/datasets.md).")
        return Dataset(name=spec, cases=load_jsonl(arg.strip()), description=f"cases from {arg.strip()}")
    raise _unknown_spec(spec)


def list_datasets(bfcl_data: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """Dataset spec -> one-line description, for ``promptgrid datasets``.

    The BFCL categories are listed when bfcl-eval's data can be found; otherwise
    one ``bfcl:<category>`` line says how to make it available.
    """
    out: dict[str, str] = {
        "mini": _describe_mini(),
        "mini:LANG[,LANG...]": "mini restricted to some languages, e.g. mini:de,ja (" + ", ".join(MINI_LANGUAGES) + ")",
    }
    from ._bfcl import BFCL_CATEGORIES, FORMAT_SENSITIVITY, bfcl_categories

    try:
        categories = bfcl_categories(None if bfcl_data is None else str(bfcl_data))
    except PromptgridError as exc:
        categories, reason = [], str(exc)
    else:
        reason = "no categories found in bfcl-eval's data"
    if categories:
        for category in categories:
            if category == FORMAT_SENSITIVITY:
                out[f"bfcl:{category}"] = "BFCL V4 format sensitivity: the 200 entries of the study"
            else:
                rule = BFCL_CATEGORIES.get(category)
                scored = f", scored as {rule}" if rule and rule != category else ""
                out[f"bfcl:{category}"] = f"BFCL category {category}{scored} (read from bfcl-eval's data files)"
    else:
        out["bfcl:<category>"] = f"BFCL categories: not available here. {reason}"
    out["jsonl:PATH"] = "your own cases, one JSON object per line (BFCL entry + ground_truth; docs/datasets.md)"
    return out
