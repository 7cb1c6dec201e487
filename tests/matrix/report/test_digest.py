"""The digest under `promptgrid run`'s table: failure modes, what they mean, and the small-sample note."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from promptgrid.matrix.report import aggregate, digest, explain
from promptgrid.matrix.report._digest import MIN_N, sample_note
from promptgrid.matrix.report._markdown import console_table, markdown_report
from promptgrid.variants import Variant
from support.rows import make_row, rows_with_accuracy

VARIANTS = [Variant(return_format=r, tool_call_tag=t) for r, t in itertools.product(("python", "json"), (False, True))]


def _failed(v: Variant, i: int, mode: str, **extra: Any) -> dict[str, Any]:
    return make_row(v, case_id=f"c{i:03d}", valid=False, failure_mode=mode, **extra)


def test_prose_answers_explain_an_accuracy_of_zero() -> None:
    rows = [_failed(v, i, "prose_instead_of_call" if i else "no_call") for v in VARIANTS for i in range(4)]
    (d,) = digest(rows)
    assert (d.model, d.scored, d.correct, d.variants) == ("m", 16, 0, 4)
    assert d.modes_line() == "prose instead of call 75% (12/16), no call 25% (4/16)"
    meaning = d.meaning()
    assert meaning.startswith("accuracy is about 0 because 100% of answers hold no call in the requested format")
    assert "answered in prose instead of calling a function" in meaning  # the most frequent format mode, in words


def test_meaning_follows_the_data() -> None:
    wrong_values = [_failed(v, i, "wrong_value") for v in VARIANTS for i in range(3)]
    assert digest(wrong_values)[0].meaning() == (
        "accuracy is about 0, though 100% of answers are calls in the requested format: most failed answers "
        "passed a wrong value.")
    errors = [make_row(v, case_id=f"c{i}", error="Timeout") for v in VARIANTS for i in range(3)]
    d = digest(errors)[0]
    assert d.modes_line() == "call error 100% (12/12)" and "--retry-errors" in d.meaning()
    ceiling = rows_with_accuracy({v: [True] * 40 for v in VARIANTS})
    assert "ceiling" in digest(ceiling)[0].meaning() and digest(ceiling)[0].modes_line() == "none"
    mixed = rows_with_accuracy({VARIANTS[0]: [True] * 30 + [False] * 10, VARIANTS[1]: [True] * 10 + [False] * 30})
    d = digest(mixed)[0]
    assert d.meaning() == ("50.0% of answers are correct over 2 variant(s) (best - worst variant 50.0 pp); most "
                           "failed answers called an offered function, but not the expected one.")
    assert d.sample is None  # n = 40 and a 50 pp spread: the variants can be told apart


def test_small_sample_rule() -> None:
    # Few jobs per variant: flagged whatever the spread.
    note = sample_note([3, 3], [0.56, 0.56], [0.0, 1.0])
    assert note is not None and note.sentence() == (
        "small sample: n=3 per variant, 95% intervals about 56 pp wide; differences between variants below 40 pp "
        "are not meaningful.")
    # Enough jobs, but a spread the intervals cannot resolve: flagged; a wide spread: not.
    assert sample_note([MIN_N, 50], [0.2, 0.2], [0.5, 0.55]) is not None
    assert sample_note([MIN_N, 50], [0.2, 0.2], [0.2, 0.6]) is None
    one = sample_note([5], [0.5], [0.4])
    assert one is not None and one.sentence() == "small sample: n=5, 95% interval about 50 pp wide."
    mixed_n = sample_note([2, 4], [0.6, 0.5], [0.0, 0.0])
    assert mixed_n is not None and mixed_n.sentence().startswith("small sample: n=2-4 per variant")


def test_explain_lists_models_meaning_and_next_command(tmp_path: Path) -> None:
    rows = [_failed(v, i, "prose_instead_of_call", model="acme/\x1b[31mm") for v in VARIANTS for i in range(2)]
    rows += rows_with_accuracy({v: [True, False] for v in VARIANTS}, model="acme/b")
    run_dir = tmp_path / "my run"
    text = explain(rows, run_dir)
    lines = text.splitlines()
    assert lines[0] == "" and "\x1b" not in text
    assert lines[1] == "acme/\\x1b[31mm: top failure modes (share of answers): prose instead of call 100% (8/8)."
    assert lines[2].startswith("  Accuracy is about 0 because 100% of answers")
    assert lines[3].startswith("  Small sample: n=2 per variant, 95% intervals about ")
    assert lines[4].startswith("acme/b: top failure modes (share of answers): wrong function 50% (4/8).")
    assert lines[-1].startswith(f"next: promptgrid report '{run_dir}'  (") and "report.html" in lines[-1]
    assert digest([]) == []


@pytest.mark.parametrize("n", [3, 200])
def test_report_summary_flags_small_samples_only(n: int) -> None:
    rows = rows_with_accuracy({VARIANTS[0]: [i % 2 == 0 for i in range(n)],
                               VARIANTS[1]: [i % 3 == 0 for i in range(n)]})
    data = aggregate(rows, n_resamples=200)
    small = "small sample: n=3 per variant, 95% intervals about"
    assert (small in console_table(data)) == (n == 3)
    assert (small.replace("small", "Small") in markdown_report(data)) == (n == 3)
