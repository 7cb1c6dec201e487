"""The built-in ``mini-mt`` conversation set at run time: its languages, its data file, and how its tool results
reach the model.

``load_conversations("mini-mt")`` gives every conversation in every language;
``"mini-mt:de,ja"`` only those languages (:func:`parse_languages`: an unknown
code is a ``DatasetError`` naming the valid ones). Each conversation's
``category`` is ``mini_mt:<lang>``, so reports group by language.

What it is
----------
24 conversation templates (``mini_mt_1`` ... ``mini_mt_24``), each written
in nine languages (``MINI_MT_LANGUAGES``: ``en, de, es, fr, it, ja, zh, hi,
pt``): 216 conversations with 2 to 5 user turns on BFCL V4's stateful classes
(``TravelAPI``, ``MessageAPI``, ``TicketAPI``), the environment state
localized to each language's region. Ids are ``mini_mt_<n>_<lang>``;
``template`` is ``mini_mt_<n>`` (the same task in every language) and
``language`` the ISO code. Templates 15-19 have a turn with no valid solution
(``no_solution_turns``), 20-24 a turn that needs a clarifying question
(``clarify_turns``).

Files and regeneration
----------------------
The set is data: ``data/mini_mt.jsonl`` (``DATA_FILE``: one ``jsonl:``
record a line, plus ``language``, ``template``, ``no_solution_turns`` and
``clarify_turns``), shipped with the package and read as any ``jsonl:`` file
(``_dataset._load_mini_mt``). Its generator -- the locales, the 24 templates,
their texts in every language, and the checks that every ground-truth call
succeeds on bfcl-eval's classes -- is not part of the package: it is
``scripts/build_mini_mt.py`` in the repository (``GENERATOR``)::

    .venv/bin/python scripts/build_mini_mt.py --write   # regenerate the file
    .venv/bin/python scripts/build_mini_mt.py --check   # exit 1 when it differs from the generator's output

Tool results
------------
A dict result (a created ticket, a booking) reaches the model as UTF-8 JSON
by default for ``mini-mt``, not bfcl-eval's ASCII escapes, so that a Hindi or
Japanese state is not shown escaped where an English one is plain: the
variant dimension ``tool_results`` (``auto``, ``ascii``, ``utf8``;
:func:`ascii_results_for`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from promptgrid.errors import DatasetError
from promptgrid.matrix.datasets._mini import _suggest
from promptgrid.variants import ToolResults

if TYPE_CHECKING:
    from promptgrid.variants import Variant


class _Categorised(Protocol):
    """What ``is_mini_mt`` reads of a ``Conversation`` (typed structurally: ``_dataset`` imports this module)."""

    @property
    def category(self) -> str: ...

__all__ = ["DATA_FILE", "GENERATOR", "MINI_MT_LANGUAGES", "ascii_results_for", "data_file", "is_mini_mt",
           "parse_languages", "template_ids"]

MINI_MT_LANGUAGES = ("en", "de", "es", "fr", "it", "ja", "zh", "hi", "pt")
DATA_FILE = Path(__file__).parent / "data" / "mini_mt.jsonl"
GENERATOR = "scripts/build_mini_mt.py"
"""The script that writes ``DATA_FILE``, relative to the repository root (not installed with the package)."""


def data_file() -> Path:
    """``DATA_FILE``; ``DatasetError`` when it is missing (a broken install), saying how to get it back."""
    if not DATA_FILE.is_file():
        raise DatasetError(f"the mini-mt data file {DATA_FILE} is missing; reinstall promptgrid, or regenerate it "
                           f"from a checkout of the repository ({GENERATOR} --write).")
    return DATA_FILE


def template_ids() -> tuple[str, ...]:
    """The set's template ids (``mini_mt_1`` ...), in file order, as the shipped file has them; ``DatasetError``
    when the file is missing or a line is not a record with a ``template``."""
    path = data_file()
    seen: dict[str, None] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            template = json.loads(line)["template"]
        except (ValueError, KeyError, TypeError):
            template = None
        if not isinstance(template, str):
            raise DatasetError(f"{path}:{number}: not a mini-mt record with a template id; reinstall promptgrid, "
                               f"or regenerate the file ({GENERATOR} --write).")
        seen.setdefault(template, None)
    return tuple(seen)


def is_mini_mt(conversation: _Categorised) -> bool:
    """Whether a conversation is one of ``mini-mt``'s: its category is ``mini_mt:<lang>`` (or ``mini_mt``)."""
    return conversation.category == "mini_mt" or conversation.category.startswith("mini_mt:")


def ascii_results_for(variant: Variant, conversation: _Categorised) -> bool:
    """Whether ``conversation``'s dict tool results reach the model ASCII-escaped under ``variant``.

    The variant's ``tool_results``: ``ascii`` (bfcl-eval's ``json.dumps``) -> True, ``utf8`` -> False, ``auto``
    (the default) -> False for a ``mini-mt`` conversation (:func:`is_mini_mt`: its Hindi, Japanese and Chinese
    ticket titles and messages reach the model as text, as list and string results do), True for any other
    (BFCL's sets and their translations, ``jsonl:`` files: bfcl-eval's behaviour). What
    ``Environment(..., ascii_results=...)`` takes for an episode's environment.
    """
    if variant.tool_results is ToolResults.ASCII:
        return True
    if variant.tool_results is ToolResults.UTF8:
        return False
    return not is_mini_mt(conversation)


def parse_languages(spec: str) -> tuple[str, ...]:
    """``"de, ja"`` -> ``("de", "ja")``; ``DatasetError`` naming the valid codes for an unknown or empty one."""
    codes = [part.strip().lower() for part in spec.split(",")]
    bad = [code for code in dict.fromkeys(codes) if code not in MINI_MT_LANGUAGES]
    if bad:
        shown = ", ".join(f"{code!r}" + (f" (did you mean {_suggest(code)!r}?)" if _suggest(code) else "")
                          for code in bad)
        raise DatasetError(f"mini-mt has no language {shown}. Its languages are: {', '.join(MINI_MT_LANGUAGES)} "
                           "(comma-separated, e.g. mini-mt:de,ja).")
    return tuple(dict.fromkeys(codes))
