"""Records, once: one ``PassK`` for single-turn and conversation reports, each record name defined once.

A single-turn report's pass^k (Ticket-Bench's only) and a conversation report's two (tau-bench's and
Ticket-Bench's, named) are instances of the same class, written as ``PassK.row()`` and ``PassK.named()``
respectively. The other records that shared a name with a different concept were renamed, their old public
names kept as aliases.
"""

from __future__ import annotations

import ast
import math
from collections import defaultdict
from pathlib import Path

import pytest

import promptgrid
from promptgrid.matrix.report import LanguageSummary, PassK, synthetic_rows
from promptgrid.matrix.report import _conversation_languages as conv_languages
from promptgrid.matrix.report import _conversations as conv_report
from promptgrid.matrix.report._compute import aggregate
from promptgrid.matrix.report._model import (
    TAU_BENCH_DEFINITION,
    TAU_BENCH_PASS_K,
    TICKET_BENCH_DEFINITION,
    TICKET_BENCH_PASS_K,
)
from promptgrid.matrix.running import estimate, findings
from promptgrid.matrix.running.results import Result, ResultRow

ROW_KEYS = ["model", "variant_id", "label", "language", "k", "value", "ci", "n_cases"]
NAMED_KEYS = ["name", "definition", "k", "entries", "value", "ci"]


def _episodes() -> list[Result]:
    """Model m, variants a and b, conversations x (en) and y (de), 3 repeats each; a fails x's repeat 2."""
    return [Result.episode(model="m", variant_id=vid, conversation_id=f"{conv}_{lang}", category="c", repeat=r,
                           valid=not (vid == "a" and conv == "x" and r == 2), language=lang, template=conv)
            for vid in ("a", "b") for conv, lang in (("x", "en"), ("y", "de")) for r in range(3)]


VARIANTS = {"a": {"call_mode": "prompt"}, "b": {"call_mode": "native"}}


@pytest.fixture(scope="module")
def single_rows() -> list[ResultRow]:
    return synthetic_rows(grid="demo", languages=("en", "de"), repeats=2, n_cases=6, seed=11)


def test_one_pass_k_class_for_both_kinds_of_report(single_rows: list[ResultRow]) -> None:
    assert conv_report.PassHatK is PassK  # the conversation report's former record is an alias
    assert conv_report.TAU_BENCH_PASS_K is TAU_BENCH_PASS_K and conv_report.TICKET_BENCH_PASS_K is TICKET_BENCH_PASS_K

    data = aggregate(single_rows, n_resamples=100)
    assert data.pass_k and {type(p) for p in data.pass_k} == {PassK}
    assert {(p.name, p.definition) for p in data.pass_k} == {(TICKET_BENCH_PASS_K, TICKET_BENCH_DEFINITION)}

    conv = conv_report.conversation_report(_episodes(), VARIANTS, k=3, n_resamples=50, labels={"a": "A"})
    lang = conv_languages.language_report(_episodes(), VARIANTS, k=3, n_resamples=50)
    records = ([s.pass_k_tau for s in (*conv.variants, *conv.models, *lang.summaries)]
               + [s.pass_k_ticket for s in (*conv.variants, *conv.models, *lang.summaries)])
    assert {type(p) for p in records} == {PassK}
    a_tau, a_ticket = conv.variants[0].pass_k_tau, conv.variants[0].pass_k_ticket
    # Entry x: c = 2 of n = 3, k = 3: tau-bench C(2,3)/C(3,3) = 0, Ticket-Bench (2/3)^3; entry y: 1 and 1.
    assert (a_tau.name, a_tau.definition) == (TAU_BENCH_PASS_K, TAU_BENCH_DEFINITION)
    assert (a_ticket.name, a_ticket.definition) == (TICKET_BENCH_PASS_K, TICKET_BENCH_DEFINITION)
    assert a_tau.value == pytest.approx(0.5) and a_ticket.value == pytest.approx((8 / 27 + 1) / 2)
    # A conversation PassK names what it measures, as a single-turn one does.
    assert (a_tau.model, a_tau.variant_id, a_tau.label, a_tau.language, a_tau.n_cases) == ("m", "a", "A", "overall", 2)
    m_tau = conv.models[0].pass_k_tau
    assert (m_tau.variant_id, m_tau.label, m_tau.language, m_tau.entries) == ("", "all variants", "overall", 4)
    de = next(s for s in lang.summaries if s.variant_id == "a" and s.language == "de")
    assert (de.pass_k_tau.language, de.pass_k_tau.label, de.pass_k_tau.value) == ("de", "a", 1.0)


def test_pass_k_is_written_as_each_report_always_wrote_it(single_rows: list[ResultRow]) -> None:
    data = aggregate(single_rows, n_resamples=100)
    rows = data.to_dict()["pass_k"]
    assert rows == [p.row() for p in data.pass_k] and list(rows[0]) == ROW_KEYS

    conv = conv_report.conversation_report(_episodes(), VARIANTS, k=3, n_resamples=50).to_dict()
    lang = conv_languages.language_report(_episodes(), VARIANTS, k=3, n_resamples=50).to_dict()
    for summary in (*conv["variants"], *conv["models"], *lang["summaries"]):
        for key in ("pass_k_tau", "pass_k_ticket"):
            assert list(summary[key]) == NAMED_KEYS
    assert conv["variants"][0]["pass_k_tau"] == {"name": TAU_BENCH_PASS_K, "definition": TAU_BENCH_DEFINITION,
                                                 "k": 3, "entries": 2, "value": 0.5,
                                                 "ci": conv["variants"][0]["pass_k_tau"]["ci"]}

    nan = PassK("m", "v", "v", "overall", 2, math.nan, (math.nan, math.nan), 0)
    assert nan.row()["value"] is None and nan.row()["ci"] == [None, None]
    assert nan.named() == {"name": TICKET_BENCH_PASS_K, "definition": TICKET_BENCH_DEFINITION, "k": 2,
                           "entries": 0, "value": None, "ci": [None, None]}


def test_renamed_records_keep_their_old_public_names() -> None:
    from promptgrid.translate import LanguageSummary as TranslateLanguageSummary
    from promptgrid.translate import TargetSummary

    assert TranslateLanguageSummary is TargetSummary and TargetSummary is not LanguageSummary
    assert estimate.Estimate is estimate.PlanEstimate and estimate.PlanEstimate is not findings.Estimate
    assert not hasattr(conv_languages, "LanguageSummary")  # private, renamed LanguageConversationSummary
    assert conv_languages.LanguageConversationSummary is not LanguageSummary


def test_no_public_class_name_is_defined_twice() -> None:
    """Each public class of the package (matrix, translate, templates, variants, the top level) has one name."""
    root = Path(promptgrid.__file__).parent
    folders = {root} | {Path(m.__file__).parent for m in _subpackages()}
    where: dict[str, list[str]] = defaultdict(list)
    for folder in folders:
        files = folder.rglob("*.py") if folder != root else folder.glob("*.py")
        for path in files:
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                    where[node.name].append(f"{path.relative_to(folder.parent)}:{node.lineno}")
    twice = {name: places for name, places in where.items() if len(places) > 1}
    assert not twice, f"classes defined more than once: {twice}"


def _subpackages() -> list[object]:
    import promptgrid.matrix
    import promptgrid.templates
    import promptgrid.translate
    import promptgrid.variants

    return [promptgrid.matrix, promptgrid.templates, promptgrid.translate, promptgrid.variants]
