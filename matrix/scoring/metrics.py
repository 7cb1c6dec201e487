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
  we sum TP/FP/FN over responses first and compute P, R, F1 once.
- FM, format matching accuracy: ITC eq. (2), correct-format responses / all.
- LM, language matching accuracy: ITC eq. (1), with langid restricted to the
  candidate languages (ITC uses langid too).
- pass^k: Ticket-Bench section 4: p_i = (c_i / M)^k for c_i correct runs out
  of M, score = mean over queries. This is *not* the unbiased combinatorial
  estimator C(c,k)/C(M,k) of tau-bench; that one is offered as
  ``estimator="unbiased"``.
- Macro average over languages: MASSIVE-Agents Table 2 reports per-language
  scores and their unweighted mean.
"""

from __future__ import annotations

import functools
import math
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_LANGUAGES",
    "PRF",
    "ast_accuracy",
    "by_group",
    "detect_language_match",
    "format_match_accuracy",
    "function_selection_accuracy",
    "identify_language",
    "language_match",
    "language_match_accuracy",
    "macro_average",
    "pass_hat_k",
    "prf",
    "tool_invocation_prf",
    "tool_selection_prf",
]

# Languages langid chooses among when no candidates are given: the languages
# of the shipped translation catalogs and of the mini dataset, plus a few
# large ones so a reply in an unexpected language is not forced into the set.
DEFAULT_LANGUAGES = ("en", "de", "es", "fr", "it", "pt", "ja", "zh", "hi", "ko", "ru", "ar", "nl", "tr")


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
    nothing predicted P is NaN (undefined), not 0; F1 is NaN if P or R is,
    and 0 when P + R is 0.
    """
    p = tp / (tp + fp) if tp + fp else math.nan
    r = tp / (tp + fn) if tp + fn else math.nan
    if math.isnan(p) or math.isnan(r):
        f1 = math.nan
    else:
        f1 = 2 * p * r / (p + r) if p + r else 0.0
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

    ``outcomes`` holds, per query, the correctness of its M runs. Ticket-Bench
    (section 4, with M = k = 3): p_i = (c_i / M)^k, pass^k = mean of p_i.
    ``estimator="unbiased"`` gives C(c_i, k) / C(M, k) instead (tau-bench's
    estimator of the chance that k fresh runs all succeed; needs M >= k).
    With M = 1 both reduce to accuracy.
    """
    if k < 1:
        raise ValueError(f"pass^k needs k >= 1, got {k}")
    if estimator not in ("ticket_bench", "unbiased"):
        raise ValueError(f"unknown pass^k estimator {estimator!r}; use 'ticket_bench' or 'unbiased'")
    scores: list[float] = []
    for runs in outcomes:
        m = len(runs)
        if m == 0:
            continue
        c = sum(1 for r in runs if r)
        if estimator == "ticket_bench":
            scores.append((c / m) ** k)
        else:
            if m < k:
                raise ValueError(f"the unbiased pass^{k} estimator needs at least {k} runs per query, got {m}")
            scores.append(math.comb(c, k) / math.comb(m, k))
    return _mean(scores)


def by_group(items: Iterable[Any], key: str | Callable[[Any], Any]) -> dict[Any, list[Any]]:
    """Group verdicts/rows by a field name (e.g. ``case_language``) or a key function, keeping order."""
    groups: dict[Any, list[Any]] = defaultdict(list)
    for item in items:
        groups[key(item) if callable(key) else _get(item, key)].append(item)
    return dict(groups)


def macro_average(scores: Mapping[Any, float]) -> float:
    """Unweighted mean of per-group scores (MASSIVE-Agents: mean over languages); NaN groups are skipped."""
    return _mean([s for s in scores.values() if not math.isnan(s)])


# --------------------------------------------------------------------------- language identification

# Language identification uses langid's model (it ships inside the langid
# wheel, so it works offline) but not langid's ``classify``: langid scores a
# dense vector of all 7,480 byte n-gram features against every language
# (about 160 us per short answer, most of a prose answer's scoring time). The
# naive Bayes score is linear in the features and each feature comes from a
# state of langid's tokenizing automaton, so the per-language log-probability
# of each automaton state is summed once per candidate set; a text then costs
# one automaton step per byte plus a sum over the states it visited. Same
# model, same decision rule (argmax of the log-probabilities, normalized
# probability of the winner); only the floating-point summation order
# differs (tests/matrix/scoring/test_metrics.py compares with langid itself).
_MODEL: Any = None
_KNOWN: frozenset[str] = frozenset()
_LOCK = threading.Lock()
#: Language identification reads the first this many characters of an answer
#: (bounded time on a megabyte of model output; the language is plain long before).
MAX_LANGID_CHARS = 10_000


class _LangidModel:
    """langid's automaton and naive Bayes parameters, with per-candidate-set state scores."""

    def __init__(self) -> None:
        import numpy as np
        from langid import langid as _langid

        identifier = _langid.LanguageIdentifier.from_modelstring(_langid.model, norm_probs=True)
        self.np = np
        self.classes = [str(c) for c in identifier.nb_classes]
        self.nextmove = identifier.tk_nextmove  # array.array: (state << 8) + byte -> state
        self.output = identifier.tk_output  # state -> feature indices it completes
        self.ptc = identifier.nb_ptc  # features x languages, log P(feature | language)
        self.pc = identifier.nb_pc  # log P(language)
        self.n_states = len(self.nextmove) >> 8
        self.subsets: dict[tuple[str, ...], tuple[Any, Any]] = {}

    def subset(self, langs: tuple[str, ...]) -> tuple[Any, Any]:
        """(state scores, priors) restricted to ``langs`` (sorted, all known)."""
        found = self.subsets.get(langs)
        if found is None:
            np = self.np
            cols = [self.classes.index(lang) for lang in langs]
            ptc = self.ptc[:, cols].astype(np.float64)
            states = np.zeros((self.n_states, len(cols)))
            for state, features in self.output.items():
                states[state] = ptc[list(features)].sum(0)
            found = (states, self.pc[cols].astype(np.float64))
            self.subsets[langs] = found
        return found

    def classify(self, text: str, langs: tuple[str, ...]) -> tuple[str, float]:
        states_score, priors = self.subset(langs)
        nextmove = self.nextmove
        state = 0
        visited: list[int] = []
        visit = visited.append
        for byte in text[:MAX_LANGID_CHARS].encode("utf-8", "surrogatepass"):
            state = nextmove[(state << 8) + byte]
            visit(state)
        np = self.np
        scores = states_score.take(visited, axis=0).sum(0) + priors
        best = int(scores.argmax())
        return langs[best], float(1.0 / np.exp(scores - scores[best]).sum())


def _base(lang: str) -> str:
    return lang.replace("_", "-").split("-")[0].lower()


def identify_language(text: str, candidates: Iterable[str] = DEFAULT_LANGUAGES) -> tuple[str, float]:
    """Most likely language of ``text`` among ``candidates`` (langid's model, probabilities normalized).

    The model ships inside the langid wheel (works offline); it is loaded once,
    on first use (about 2 s). Candidates langid does not know are ignored.
    Results are memoized: refusals and clarifying questions recur verbatim.
    """
    return _identify(text, _candidate_set(candidates if isinstance(candidates, tuple) else tuple(candidates)))


@functools.lru_cache(maxsize=256)
def _candidate_set(candidates: tuple[str, ...]) -> frozenset[str]:
    return frozenset(_base(c) for c in candidates)


def _model() -> _LangidModel:
    global _MODEL, _KNOWN
    with _LOCK:
        if _MODEL is None:
            _MODEL = _LangidModel()
            _KNOWN = frozenset(_MODEL.classes)
    return _MODEL


@functools.lru_cache(maxsize=256)
def _known_sorted(candidates: frozenset[str]) -> tuple[str, ...]:
    return tuple(sorted(candidates & _KNOWN))


@functools.lru_cache(maxsize=4096)
def _identify(text: str, candidates: frozenset[str]) -> tuple[str, float]:
    model = _MODEL if _MODEL is not None else _model()
    langs = _known_sorted(candidates)
    if not langs:
        raise ValueError(f"none of the candidate languages {sorted(set(candidates))} is known to langid")
    if langs not in model.subsets:
        with _LOCK:
            model.subset(langs)
    return model.classify(text, langs)


def language_match(text: str, expected: str, candidates: Iterable[str] = DEFAULT_LANGUAGES) -> bool | None:
    """Is ``text`` in the ``expected`` language (ITC LM, per response)?

    ``None`` when it cannot be told: empty text, or a language langid does not
    know. The expected language is always among the candidates.
    """
    return detect_language_match(text, expected, candidates)[1]


def detect_language_match(text: str, expected: str, candidates: Iterable[str] = DEFAULT_LANGUAGES
                          ) -> tuple[str | None, bool | None]:
    """(language of ``text``, whether it is ``expected``); ``None`` parts where that cannot be told."""
    if not text.strip():
        return None, None
    want = _base(expected)
    try:
        lang, _ = identify_language(text, (*candidates, want))
    except ValueError:
        return None, None
    return lang, (lang == want) if want in _KNOWN else None
