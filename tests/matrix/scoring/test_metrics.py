"""Metric functions against hand-computed fixtures (ITC A.3, Ticket-Bench pass^k, MASSIVE-Agents FSA)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from promptgrid.matrix.scoring.metrics import (
    ast_accuracy,
    by_group,
    format_match_accuracy,
    function_selection_accuracy,
    language_match_accuracy,
    macro_average,
    pass_hat_k,
    prf,
    tool_invocation_prf,
    tool_selection_prf,
)
from promptgrid.matrix.scoring.verdict import ErrorCode, Verdict


def test_prf_formulas() -> None:
    # ITC eqs. 3-5: P = 3/5, R = 3/6, F1 = 2PR/(P+R) = 6/11.
    r = prf(3, 2, 3)
    assert r.precision == pytest.approx(0.6)
    assert r.recall == pytest.approx(0.5)
    assert r.f1 == pytest.approx(6 / 11)
    assert math.isnan(prf(0, 0, 4).precision)  # nothing predicted: P undefined
    assert prf(0, 0, 4).recall == 0.0
    assert prf(0, 0, 4).f1 == 0.0  # F1 = 2TP/(2TP+FP+FN): 0 for a model that never calls
    assert math.isnan(prf(0, 0, 0).f1)  # nothing predicted, nothing expected
    assert prf(0, 3, 4).f1 == 0.0


def test_itc_prf_is_micro_averaged_over_responses() -> None:
    rows = [
        {"tool_tp": 2, "tool_fp": 1, "tool_fn": 0, "arg_tp": 4, "arg_fp": 0, "arg_fn": 1},
        {"tool_tp": 0, "tool_fp": 0, "tool_fn": 2, "arg_tp": 0, "arg_fp": 0, "arg_fn": 3},
        {"tool_tp": 1, "tool_fp": 1, "tool_fn": 1, "arg_tp": 1, "arg_fp": 2, "arg_fn": 0},
    ]
    tools = tool_selection_prf(rows)
    assert (tools.tp, tools.fp, tools.fn) == (3, 2, 3)
    assert tools.precision == pytest.approx(3 / 5)  # macro over responses would be (2/3 + 1/2) / 2
    assert tools.recall == pytest.approx(3 / 6)
    assert tools.f1 == pytest.approx(6 / 11)
    args = tool_invocation_prf(rows)
    assert args.precision == pytest.approx(5 / 7)
    assert args.recall == pytest.approx(5 / 9)
    assert args.f1 == pytest.approx(2 * (5 / 7) * (5 / 9) / (5 / 7 + 5 / 9))


def test_rates_over_verdicts_and_dicts() -> None:
    verdicts = [
        Verdict(True, ErrorCode.VALID, function_selection_correct=True, format_match=True),
        Verdict(False, ErrorCode.VALUE_ERROR_STRING, function_selection_correct=True, format_match=True),
        Verdict(False, ErrorCode.DECODER_FAILED, format_match=False),
        Verdict(True, ErrorCode.VALID, function_selection_correct=True, format_match=None, language_match=True),
    ]
    assert ast_accuracy(verdicts) == 0.5
    assert ast_accuracy([v.to_dict() for v in verdicts]) == 0.5
    assert function_selection_accuracy(verdicts) == 0.75
    assert format_match_accuracy(verdicts) == pytest.approx(2 / 3)  # None: not applicable
    assert language_match_accuracy(verdicts) == 1.0
    assert math.isnan(ast_accuracy([]))


def test_pass_hat_k_ticket_bench() -> None:
    runs = [[True, True, True], [True, False, True], [False, False, False], [True, False, False]]
    # Ticket-Bench: mean of (c/M)^k = (1 + 8/27 + 0 + 1/27) / 4 = 1/3.
    assert pass_hat_k(runs, 3) == pytest.approx(1 / 3)
    # tau-bench's unbiased C(c,k)/C(M,k) = (1 + 0 + 0 + 0) / 4.
    assert pass_hat_k(runs, 3, estimator="unbiased") == pytest.approx(1 / 4)
    # k = 1 is plain accuracy over all runs of equal length.
    assert pass_hat_k(runs, 1) == pytest.approx(6 / 12)
    assert pass_hat_k(runs, 2) == pytest.approx((1 + 4 / 9 + 0 + 1 / 9) / 4)
    with pytest.raises(ValueError):
        pass_hat_k(runs, 4, estimator="unbiased")
    with pytest.raises(ValueError):
        pass_hat_k(runs, 0)


@given(st.lists(st.lists(st.booleans(), min_size=3, max_size=3), min_size=1), st.integers(1, 3))
def test_pass_hat_k_bounds(runs: list[list[bool]], k: int) -> None:
    value = pass_hat_k(runs, k)
    assert 0.0 <= value <= 1.0
    assert value <= pass_hat_k(runs, 1) + 1e-12  # more attempts can only be harder
    assert pass_hat_k(runs, k, estimator="unbiased") <= pass_hat_k(runs, 1) + 1e-12


def test_macro_average_over_languages() -> None:
    rows = [{"valid": True, "case_language": "en"}, {"valid": True, "case_language": "en"},
            {"valid": False, "case_language": "de"}, {"valid": True, "case_language": "de"},
            {"valid": True, "case_language": "de"}, {"valid": True, "case_language": "de"}]
    groups = by_group(rows, "case_language")
    per_language = {lang: ast_accuracy(items) for lang, items in groups.items()}
    assert per_language == {"en": 1.0, "de": 0.75}
    assert macro_average(per_language) == pytest.approx(0.875)  # micro would be 5/6
    assert macro_average({"en": 1.0, "ja": math.nan}) == 1.0
