"""promptgrid's verdicts agree with bfcl-eval's on bfcl:format_sensitivity (26 configs x 200 entries).

For every (config, entry): a correct response in the config's format, built
from the ground truth, and (for a seeded share of the pairs, all of them with
PROMPTGRID_FULL_AGREEMENT=1) its corruptions (support.bfcl_reference.KINDS). Both
scorers see every response: promptgrid's ``score()`` and bfcl-eval's own
decoder + ``ast_checker`` called as its format-sensitivity runner calls them.
Validity and error type must be identical, except where the parser reports a
documented deliberate deviation (``ParseResult.bfcl_deviation``; listed in
docs/parsing.md and counted in the printed table).

Run with ``-s`` to see the summary table.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from typing import Any

import pytest

from promptgrid.matrix.scoring import FailureMode as F
from promptgrid.matrix.scoring import bfcl_verdict, clear_caches, score
from promptgrid.matrix.scoring.parse import Deviation, parse_response
from support import bfcl_reference as helper

FULL = os.environ.get("PROMPTGRID_FULL_AGREEMENT") == "1"
DEFAULT_FRACTION = 0.2  # of (config, entry) pairs that get corruptions in the default run

# The deliberate differences from bfcl-eval this corpus can meet (docs/parsing.md).
DOCUMENTED = {Deviation.JSON_CLOSE_BRACE_BRACKET}

# The failure mode each corruption may get (None: the response is still valid).
ALLOWED_MODES: dict[str, set[F | None]] = {
    "correct": {None},
    "wrong_func_name": {F.HALLUCINATED_FUNCTION},
    "missing_required": {F.MISSING_PARAMETER},
    "wrong_type": {F.WRONG_TYPE},
    "unknown_param": {F.UNKNOWN_PARAMETER},
    "wrong_value": {F.WRONG_VALUE},
    "swapped_order": {None},
    "missing_tag": {F.TAG_MISSING},
    "per_call_functions": {F.PER_CALL_FUNCTIONS_WRAPPING},
    "per_call_toolcall": {F.PER_CALL_TOOLCALL_WRAPPING},
    "xml_type_names": {None, F.WRONG_XML_TYPE_NAMES},  # "str" for string still reads as a string
    "prose_before": {None, F.PROSE_AROUND_CALL},  # JSON and XML readers skip prose; Python does not
    "prose_only": {F.PROSE_INSTEAD_OF_CALL},
    "other_format": {None, F.OTHER_FORMAT},  # a call without parameters reads the same in both XMLs
    "unclosed": {F.UNCLOSED_TAG, F.MALFORMED_CALL},
    "empty": {F.NO_CALL},
}
# Kinds built from the right calls: read in whatever format they are in, they pass.
AGNOSTIC_VALID = {"correct", "swapped_order", "missing_tag", "per_call_functions", "per_call_toolcall",
                  "xml_type_names", "prose_before", "other_format"}


@pytest.fixture(scope="module")
def corpus(bfcl_reference: Any) -> dict[str, Any]:
    from promptgrid.matrix.datasets import load_dataset
    from promptgrid.variants import load_grid

    configs, entries = helper.load_entries()
    started = time.perf_counter()
    items = helper.build_corpus(configs, entries, corrupt_fraction=1.0 if FULL else DEFAULT_FRACTION, seed=20250)
    built = time.perf_counter() - started
    cases = {c.id: c for c in load_dataset("bfcl:format_sensitivity").cases}
    variants = {v.id: v for v in load_grid("bfcl_v4").variants}
    return {"helper": helper, "configs": configs, "entries": entries, "items": items, "cases": cases,
            "variants": variants, "built": built}


@pytest.mark.slow
def test_corpus_covers_every_config_and_entry(corpus: dict[str, Any]) -> None:
    items = corpus["items"]
    pairs = {(it.config, it.entry_id) for it in items if it.kind == "correct"}
    assert len(corpus["configs"]) == 26 and len(corpus["entries"]) == 200
    assert len(pairs) == 26 * 200
    assert set(corpus["configs"]) <= set(corpus["variants"]), "bfcl_v4 grid ids must be bfcl-eval's config strings"
    assert {it.entry_id for it in items} <= set(corpus["cases"])
    kinds = Counter(it.kind for it in items)
    assert len([k for k in kinds if k != "correct"]) >= 8
    if FULL:
        assert kinds["correct"] == 5200 and kinds["empty"] == 5200


@pytest.mark.slow
def test_verdicts_agree_with_bfcl_eval(corpus: dict[str, Any], bfcl_reference: Any) -> None:
    helper, items, cases, variants = corpus["helper"], corpus["items"], corpus["cases"], corpus["variants"]
    by_id = {e.id: e for e in corpus["entries"]}

    started = time.perf_counter()
    theirs = list(helper.iter_reference(bfcl_reference, items, by_id))
    t_bfcl = time.perf_counter() - started
    clear_caches()
    started = time.perf_counter()
    ours = [score(it.text, variants[it.config], cases[it.entry_id]) for it in items]
    t_ours = time.perf_counter() - started

    table: Counter[tuple[str, str]] = Counter()
    undocumented: list[str] = []
    mode_problems: list[str] = []
    agnostic_problems: list[str] = []
    for item, (valid, error_type), verdict in zip(items, theirs, ours, strict=True):
        variant = variants[item.config]
        assert (verdict.failure_mode is None) == verdict.valid
        assert bfcl_verdict(item.text, variant, cases[item.entry_id]).code is verdict.error_code, item
        if verdict.failure_mode not in ALLOWED_MODES[item.kind]:
            mode_problems.append(f"{item.kind} {item.config} {item.entry_id}: {verdict.failure_mode}")
        if item.kind in AGNOSTIC_VALID and not verdict.format_agnostic_valid:
            agnostic_problems.append(f"{item.kind} {item.config} {item.entry_id}: {verdict.message}")
        if verdict.valid == valid and verdict.bfcl_error_type == error_type:
            table[(item.kind, "agree")] += 1
            continue
        deviation = parse_response(item.text, variant.return_format, variant.tool_call_tag).bfcl_deviation
        if deviation in DOCUMENTED:
            table[(item.kind, f"deliberate: {deviation.value}")] += 1
            continue
        table[(item.kind, "DISAGREE")] += 1
        undocumented.append(f"{item.kind} {item.config} {item.entry_id}: bfcl-eval {error_type or 'valid'}, "
                            f"promptgrid {verdict.bfcl_error_type or 'valid'} ({verdict.message}) "
                            f"text={item.text[:200]!r}")

    _print_summary(table, len(items), corpus["built"], t_bfcl, t_ours)
    assert not undocumented, f"{len(undocumented)} undocumented disagreements, e.g.:\n" + "\n".join(undocumented[:10])
    assert not mode_problems, f"{len(mode_problems)} unexpected failure modes, e.g.:\n" + "\n".join(mode_problems[:10])
    assert not agnostic_problems, (f"{len(agnostic_problems)} responses not format-agnostically valid, e.g.:\n"
                                   + "\n".join(agnostic_problems[:10]))
    correct = [v for it, v in zip(items, ours, strict=True) if it.kind == "correct"]
    assert all(v.valid for v in correct), "every correct response must be valid for promptgrid"


def _print_summary(table: Counter[tuple[str, str]], n: int, built: float, t_bfcl: float, t_ours: float) -> None:
    from tabulate import tabulate

    kinds = sorted({k for k, _ in table})
    columns = sorted({c for _, c in table}, key=lambda c: (c != "agree", c))
    rows = [[kind, *[table.get((kind, c), 0) for c in columns]] for kind in kinds]
    rows.append(["total", *[sum(table.get((k, c), 0) for k in kinds) for c in columns]])
    mode = "full (PROMPTGRID_FULL_AGREEMENT=1)" if FULL else f"default (corruptions on {DEFAULT_FRACTION:.0%} of pairs)"
    print(f"\nbfcl-eval agreement, {mode}: {n} responses; corpus built in {built:.1f} s, "
          f"bfcl-eval {t_bfcl:.1f} s, promptgrid score() {t_ours:.1f} s")
    print(tabulate(rows, headers=["kind", *columns], tablefmt="github"))
