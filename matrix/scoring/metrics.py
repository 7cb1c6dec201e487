"""Aggregate metrics over verdicts: pure functions, each citing where it comes from.

Inputs are ``Verdict`` objects or the dicts ``Verdict.to_dict()`` / the run
store produce (any mapping with the same field names), so reports can work
from exported rows without re-scoring.

- AST accuracy: BFCL (seeds/bfcl_icml2025_reviews.txt), share of valid responses.
- FSA, function selection accuracy: MASSIVE-Agents section 4 ("the proportion
  of queries for which the model correctly identifies the intended function",
  arguments aside), averaged over languages for aggregates.
- Tool selection and tool invocation P/R/F1: ITC appendix A.3, eqs. (3)-(8).
  The formulas divide *amounts* summed over the whole test set ("amount of
  correct tools / amount of predicted tools"), i.e. they are micro-averaged;
  we sum TP/FP/FN over responses first and compute P, R, F1 once (``prf``,
  also the report's F1).
- FM, format matching accuracy: ITC eq. (2), correct-format responses / all.
- LM, language matching accuracy: ITC eq. (1), with langid restricted to the
  candidate languages (ITC uses langid too); each response's match is
  ``promptgrid.languages.detect_language_match``, computed when scoring.
- pass^k: Ticket-Bench section 4: p_i = (c_i / M)^k for c_i correct runs out
  of M, score = mean over queries. This is *not* the unbiased combinatorial
  estimator C(c,k)/C(M,k) of tau-bench; that one is offered as
  ``estimator="unbiased"``.
- Macro average over languages: MASSIVE-Agents Table 2 reports per-language
  scores and their unweighted mean.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "PRF",
    "ast_accuracy",
    "by_group",
    "format_match_accuracy",
    "function_selection_accuracy",
    "language_match_accuracy",
    "macro_average",
    "pass_hat_k",
    "pass_hat_k_case",
    "prf",
    "tool_invocation_prf",
    "tool_selection_prf",
]


def _get(item: Any, name: str) -> Any:
    if isinstance(item, Mapping):
        return item.get(name)
    return getattr(item, name, None)


def _mean(values: Sequence[float]) -> float:
    """Mean, NaN for no values (an empty cell is not a zero score)."""
    return sum(values) / len(values) if values else math.nan


def ast_accuracy(verdicts: Iterable[Any]) -> float:
    """Share of valid responses (BFCL AST accuracy, all-or-nothing per response)."""
    return _mean([1.0 if _get(v, "valid") else 0.0 for v in verdicts])


def function_selection_accuracy(verdicts: Iterable[Any]) -> float:
    """MASSIVE-Agents FSA: share of responses whose called functions are the expected ones."""
    return _mean([1.0 if _get(v, "function_selection_correct") else 0.0 for v in verdicts])


def format_match_accuracy(verdicts: Iterable[Any]) -> float:
    """ITC FM, eq. (2): responses in the requested format / responses it applies to.

    ``format_match`` is ``None`` for a free-text answer where no call was
    expected; those responses are left out of both amounts.
    """
    return _mean([1.0 if m else 0.0 for m in (_get(v, "format_match") for v in verdicts) if m is not None])


def language_match_accuracy(verdicts: Iterable[Any]) -> float:
    """ITC LM, eq. (1): free-text answers in the case's language / free-text answers."""
    return _mean([1.0 if m else 0.0 for m in (_get(v, "language_match") for v in verdicts) if m is not None])


@dataclass(frozen=True)
class PRF:
    """Precision, recall and F1 from summed counts (NaN where a denominator is 0)."""

    precision: float
    recall: float
    f1: float
    tp: int
    fp: int
    fn: int


def prf(tp: int, fp: int, fn: int) -> PRF:
    """ITC eqs. (3)-(5) / (6)-(8): P = TP/(TP+FP), R = TP/(TP+FN), F1 = 2PR/(P+R).

    ``TP + FP`` is the amount predicted, ``TP + FN`` the gold amount. With
    nothing predicted P is NaN (undefined), not 0; with nothing expected R
    is. F1 is computed as 2TP / (2TP + FP + FN), the same value wherever
    2PR/(P+R) is defined, and 0 (not NaN) when P or R is undefined but
    something was predicted or expected: a model that never calls a tool
    scores 0, and a macro average, which skips NaN, cannot leave it out.
    NaN only when there is nothing at all.
    """
    p = tp / (tp + fp) if tp + fp else math.nan
    r = tp / (tp + fn) if tp + fn else math.nan
    f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else math.nan
    return PRF(p, r, f1, tp, fp, fn)


def _summed(verdicts: Iterable[Any], prefix: str) -> PRF:
    tp = fp = fn = 0
    for v in verdicts:
        tp += int(_get(v, f"{prefix}_tp") or 0)
        fp += int(_get(v, f"{prefix}_fp") or 0)
        fn += int(_get(v, f"{prefix}_fn") or 0)
    return prf(tp, fp, fn)


def tool_selection_prf(verdicts: Iterable[Any]) -> PRF:
    """ITC tool selection P/R/F1 (A.3 eqs. 3-5), micro-averaged: function names, counts summed first."""
    return _summed(verdicts, "tool")


def tool_invocation_prf(verdicts: Iterable[Any]) -> PRF:
    """ITC tool invocation P/R/F1 (A.3 eqs. 6-8), micro-averaged over (name, key, value) triples."""
    return _summed(verdicts, "arg")


def pass_hat_k(outcomes: Iterable[Sequence[bool]], k: int, *, estimator: str = "ticket_bench") -> float:
    """pass^k: how reliably each query is solved over repeated runs, averaged over queries.

    ``outcomes`` holds, per query, the correctness of its M runs; each query
    scores :func:`pass_hat_k_case`. With M = 1 both estimators reduce to
    accuracy. The unbiased one needs M >= k for every query.
    """
    if k < 1:
        raise ValueError(f"pass^k needs k >= 1, got {k}")
    if estimator not in ("ticket_bench", "unbiased"):
        raise ValueError(f"unknown pass^k estimator {estimator!r}; use 'ticket_bench' or 'unbiased'")
    unbiased = estimator == "unbiased"
    scores: list[float] = []
    for runs in outcomes:
        m = len(runs)
        if m == 0:
            continue
        if unbiased and m < k:
            raise ValueError(f"the unbiased pass^{k} estimator needs at least {k} runs per query, got {m}")
        scores.append(pass_hat_k_case(sum(1 for r in runs if r), m, k, unbiased=unbiased))
    return _mean(scores)


def pass_hat_k_case(correct: int, trials: int, k: int, *, unbiased: bool = False) -> float:
    """One query's pass^k from ``correct`` of ``trials`` runs (the one definition; reports bootstrap it).

    Ticket-Bench (section 4, with M = k = 3): (c / M)^k. ``unbiased=True``:
    C(c, k) / C(M, k), tau-bench's estimator of the chance that k fresh runs
    all succeed; NaN when M < k.
    """
    if not unbiased:
        return (correct / trials) ** k
    return math.comb(correct, k) / math.comb(trials, k) if k <= trials else math.nan


def by_group(items: Iterable[Any], key: str | Callable[[Any], Any]) -> dict[Any, list[Any]]:
    """Group verdicts/rows by a field name (e.g. ``case_language``) or a key function, keeping order."""
    groups: dict[Any, list[Any]] = defaultdict(list)
    for item in items:
        groups[key(item) if callable(key) else _get(item, key)].append(item)
    return dict(groups)


def macro_average(scores: Mapping[Any, float]) -> float:
    """Unweighted mean of per-group scores (MASSIVE-Agents: mean over languages); NaN groups are skipped."""
    return _mean([s for s in scores.values() if not math.isnan(s)])
