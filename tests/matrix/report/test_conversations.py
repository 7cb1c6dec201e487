"""conversation_report: pass^k (both definitions), unfinished episodes, paired tests, turns, failure modes, native gap.

Every expectation is computed by hand in the comment beside it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import pytest

from promptgrid.matrix.report._conversations import (
    TAU_BENCH_PASS_K,
    TICKET_BENCH_PASS_K,
    ConversationReport,
    conversation_report,
)
from promptgrid.matrix.running.results import Result
from promptgrid.matrix.scoring.state_check import TurnFailureMode
from support.episodes import made_turn

RESAMPLES = 200  # enough for the interval checks, fast


def ep(vid: str, conv: str, repeat: int, valid: bool | None, *, model: str = "m", turns: Sequence[bool] | None = None,
       mode: str | None = None, cost: float | None = None, latency: float = 0.0, steps: int = 0) -> Result:
    if turns is None:
        turns = [] if valid is None else [bool(valid)]
    return Result.episode(model=model, variant_id=vid, conversation_id=conv, category="multi_turn_base",
                          repeat=repeat, valid=valid,
                          failure_mode=mode if mode is not None else (None if valid or valid is None else
                                                                      "wrong_end_state"),
                          turns=tuple(made_turn(i, t) for i, t in enumerate(turns)), steps=steps, cost_usd=cost,
                          latency_s=latency, error="stopped" if valid is None else None)


def report(episodes: Sequence[Result], variants: dict[str, dict[str, str]], **kw: object) -> ConversationReport:
    return conversation_report(episodes, variants, n_resamples=RESAMPLES, **kw)  # type: ignore[arg-type]


def repeats(vid: str, conv: str, outcomes: Sequence[bool | None], **kw: object) -> list[Result]:
    return [ep(vid, conv, r, v, **kw) for r, v in enumerate(outcomes)]  # type: ignore[arg-type]


ONE = {"a": {"call_mode": "prompt"}}


# ------------------------------------------------------------------------------------------------ pass^k


def test_pass_k_both_definitions_single_entry() -> None:
    # c = 2 of n = 3, k = 2: tau-bench C(2,2)/C(3,2) = 1/3; Ticket-Bench (2/3)^2 = 4/9.
    r = report(repeats("a", "x", [True, True, False]), ONE, k=2)
    v = r.variants[0]
    assert v.pass_k_tau.name == TAU_BENCH_PASS_K and v.pass_k_ticket.name == TICKET_BENCH_PASS_K
    assert v.pass_k_tau.value == pytest.approx(1 / 3)
    assert v.pass_k_ticket.value == pytest.approx(4 / 9)
    assert v.pass_k_tau.k == v.pass_k_ticket.k == 2
    assert v.entries == 1 and v.episodes == 3 and v.valid == 2
    assert v.accuracy == pytest.approx(2 / 3)


def test_pass_k_mean_over_entries_and_default_k() -> None:
    eps = repeats("a", "x", [True, True, False]) + repeats("a", "y", [True, True, True])
    # k = 2: tau mean(1/3, 1) = 2/3; Ticket mean(4/9, 1) = 13/18.
    r2 = report(eps, ONE, k=2)
    assert r2.variants[0].pass_k_tau.value == pytest.approx(2 / 3)
    assert r2.variants[0].pass_k_ticket.value == pytest.approx(13 / 18)
    assert r2.variants[0].pass_k_tau.entries == 2
    # default k: every entry has 3 finished repeats -> k = 3: tau mean(0, 1) = 1/2; Ticket mean(8/27, 1) = 35/54.
    r3 = report(eps, ONE)
    assert r3.k == 3
    assert r3.variants[0].pass_k_tau.value == pytest.approx(0.5)
    assert r3.variants[0].pass_k_ticket.value == pytest.approx(35 / 54)
    # k = 1: both are the mean per-entry pass rate: mean(2/3, 1) = 5/6.
    r1 = report(eps, ONE, k=1)
    assert r1.variants[0].pass_k_tau.value == pytest.approx(5 / 6)
    assert r1.variants[0].pass_k_ticket.value == pytest.approx(5 / 6)


def test_pass_k_per_model_over_variant_entries() -> None:
    variants = {"a": {}, "b": {}}
    eps = repeats("a", "x", [True, True, False]) + repeats("b", "x", [True, True, True])
    r = report(eps, variants, k=2)
    m = r.models[0]
    # entries (a, x): c=2, n=3 and (b, x): c=3, n=3; tau mean(1/3, 1) = 2/3; Ticket mean(4/9, 1) = 13/18.
    assert m.entries == 2 and m.variants == 2 and m.episodes == 6 and m.valid == 5
    assert m.pass_k_tau.value == pytest.approx(2 / 3)
    assert m.pass_k_ticket.value == pytest.approx(13 / 18)
    assert m.accuracy == pytest.approx(5 / 6)


def test_pass_k_intervals_are_deterministic_and_degenerate_when_every_entry_agrees() -> None:
    eps = [e for c in "wxyz" for e in repeats("a", c, [True, True])]
    r = report(eps, ONE)
    assert r.variants[0].pass_k_tau.ci == (1.0, 1.0)  # every entry is 1: every resample is 1
    mixed = [e for c, o in zip("wxyz", [[True, True], [True, False], [False, False], [True, True]], strict=True)
             for e in repeats("a", c, o)]
    first, second = report(mixed, ONE), report(mixed, ONE)
    assert first.variants[0].pass_k_ticket.ci == second.variants[0].pass_k_ticket.ci
    lo, hi = first.variants[0].pass_k_ticket.ci
    # Ticket-Bench k=2: mean(1, 1/4, 0, 1) = 9/16, inside its interval, which is not a point
    assert first.variants[0].pass_k_ticket.value == pytest.approx(9 / 16)
    assert lo <= 9 / 16 <= hi and lo < hi


# ------------------------------------------------------------------------------------------- unfinished


def test_unfinished_episodes_are_counted_not_scored() -> None:
    eps = (repeats("a", "x", [True, None, False], cost=0.5, latency=2.0)
           + repeats("a", "y", [None, None, None], cost=0.25, latency=1.0)
           + repeats("a", "z", [False, False, False], cost=None, latency=1.0))
    r = report(eps, ONE)
    v = r.variants[0]
    # x: 2 finished (1 valid); y: none finished (no entry); z: 3 finished, 0 valid.
    assert (v.entries, v.episodes, v.unfinished, v.valid) == (2, 5, 4, 1)
    assert v.accuracy == pytest.approx(1 / 5)  # unfinished not counted as failures: 1/5, not 1/9
    assert r.k == 2  # the shortest entry (x) has 2 finished repeats; y is no entry
    # tau k=2: x C(1,2)/C(2,2) = 0, z 0 -> 0; Ticket: x (1/2)^2 = 1/4, z 0 -> 1/8
    assert v.pass_k_tau.value == 0.0 and v.pass_k_ticket.value == pytest.approx(1 / 8)
    # failures: the 4 finished invalid episodes, none of the unfinished
    assert r.failure_modes[0].failed == 4
    # costs: the known ones of all episodes (unfinished included): 3 * 0.5 + 3 * 0.25; 3 unknown
    assert v.cost_usd == pytest.approx(2.25) and v.cost_unknown == 3
    assert v.latency_s == pytest.approx(12.0)
    assert (r.episodes, r.finished, r.unfinished) == (9, 5, 4)
    assert "not scored as failures" in r.to_markdown()
    assert "unfinished" in r.console()


def test_only_unfinished_gives_k_1_and_no_numbers() -> None:
    r = report(repeats("a", "x", [None, None]), ONE)
    assert r.k == 1
    v = r.variants[0]
    assert v.entries == 0 and v.episodes == 0 and v.unfinished == 2 and math.isnan(v.accuracy)
    d = r.to_dict()
    assert d["variants"][0]["accuracy"] is None and d["variants"][0]["pass_k_tau"]["value"] is None
    json.dumps(d, allow_nan=False)
    r.to_markdown()


# ------------------------------------------------------------------------------------- paired comparisons


def test_mcnemar_counts_pvalues_and_holm() -> None:
    variants = {"A": {}, "B": {}, "C": {}}
    outcomes = {"A": [1, 1, 1, 1, 1, 1], "B": [0, 0, 0, 0, 0, 0], "C": [1, 1, 1, 1, 1, 0]}
    eps = [ep(v, f"x{i}", 0, bool(o)) for v, os in outcomes.items() for i, o in enumerate(os)]
    r = report(eps, variants)
    by = {(c.reference, c.other): c for c in r.comparisons}
    assert set(by) == {("A", "B"), ("A", "C"), ("B", "C")}  # 3 variants <= 8: every pair
    ab, ac, bc = by["A", "B"], by["A", "C"], by["B", "C"]
    assert (ab.b, ab.c, ab.entries) == (6, 0, 6)
    assert (ac.b, ac.c) == (1, 0)
    assert (bc.b, bc.c) == (0, 5)
    # exact McNemar: 2 * P[X <= 0], X ~ Bin(6, 1/2) = 2/64; Bin(1): min(1, 2 * 1/2) = 1; Bin(5): 2/32
    assert ab.p_value == pytest.approx(1 / 32)
    assert ac.p_value == pytest.approx(1.0)
    assert bc.p_value == pytest.approx(1 / 16)
    # Holm: 3 * 1/32 = 0.09375; max(0.09375, 2 * 1/16) = 0.125; max(0.125, 1 * 1) = 1
    assert ab.p_holm == pytest.approx(0.09375)
    assert bc.p_holm == pytest.approx(0.125)
    assert ac.p_holm == pytest.approx(1.0)
    # differences: other - reference of the mean pass rate
    assert ab.diff == pytest.approx(-1.0) and ab.reference_rate == 1.0 and ab.other_rate == 0.0
    assert ac.diff == pytest.approx(-1 / 6)
    assert ab.diff_ci == (-1.0, -1.0)
    assert ab.against_baseline and ac.against_baseline and not bc.against_baseline


def test_majority_with_repeats_ties_and_shared_entries_only() -> None:
    variants = {"A": {}, "B": {}}
    eps = (repeats("A", "x", [True, False]) + repeats("B", "x", [True, True])  # A tie (no majority), B majority
           + repeats("A", "y", [True, True]) + repeats("B", "y", [False, True])  # A majority, B tie
           + repeats("A", "z", [True, True]) + repeats("B", "z", [None, None]))  # z: B unfinished, not shared
    r = report(eps, variants)
    c = r.comparisons[0]
    assert c.entries == 2
    assert (c.b, c.c) == (1, 1)
    # rates on x, y: A (1/2 + 1) / 2 = 3/4; B (1 + 1/2) / 2 = 3/4; diff 0
    assert c.reference_rate == pytest.approx(0.75) and c.other_rate == pytest.approx(0.75)
    assert c.diff == pytest.approx(0.0)


def test_many_variants_are_compared_with_the_first_only() -> None:
    variants = {f"v{i}": {} for i in range(10)}
    eps = [ep(v, "x", 0, True) for v in variants]
    r = report(eps, variants)
    assert [(c.reference, c.other) for c in r.comparisons] == [("v0", f"v{i}") for i in range(1, 10)]
    assert len(r.divergence) == 9


def test_baseline_is_the_first_variant_in_the_given_order() -> None:
    variants = {"z": {}, "a": {}}
    r = report([ep("a", "x", 0, True), ep("z", "x", 0, False)], variants)
    assert (r.comparisons[0].reference, r.comparisons[0].other) == ("z", "a")
    assert [v.variant_id for v in r.variants] == ["z", "a"]


# ---------------------------------------------------------------------------------------- turn positions


def test_accuracy_by_turn_position() -> None:
    eps = [ep("a", "x", 0, False, turns=[True, True, False]),
           ep("a", "y", 0, False, turns=[True, False]),
           ep("a", "z", 0, False, turns=[False]),
           ep("a", "w", 0, None, turns=[True, True, True, True])]  # unfinished: left out
    r = report(eps, ONE)
    pos = r.turn_accuracy[0].positions
    # turn 0: 3 episodes, 2 valid; turn 1: 2 episodes, 1 valid; turn 2: 1, 0 valid; no turn 3
    assert [(p.turn, p.n, p.valid) for p in pos] == [(0, 3, 2), (1, 2, 1), (2, 1, 0)]
    assert pos[0].accuracy == pytest.approx(2 / 3)
    md = r.to_markdown()
    assert "66.7 (3)" in md and "turn 3" not in md


# -------------------------------------------------------------------------------------- first divergence


def test_first_divergence_turn() -> None:
    variants = {"A": {}, "B": {}}
    eps = [
        ep("A", "x", 0, False, turns=[True, True, False]), ep("B", "x", 0, False, turns=[True, False, False]),  # 1
        ep("A", "x", 1, True, turns=[True, True, True]), ep("B", "x", 1, True, turns=[True, True, True]),  # never
        ep("A", "y", 0, False, turns=[False, True]), ep("B", "y", 0, True, turns=[True, True]),  # 0
        ep("A", "y", 1, None), ep("B", "y", 1, True, turns=[True, True]),  # A unfinished: not compared
        ep("A", "z", 0, False, turns=[True, True, False, False]), ep("B", "z", 0, True, turns=[True] * 4),  # 2
    ]
    r = report(eps, variants)
    d = r.divergence[0]
    assert (d.reference, d.other) == ("A", "B")
    assert d.compared == 4
    assert d.by_turn == ((0, 1), (1, 1), (2, 1))
    assert d.never == 1
    assert d.median_turn == pytest.approx(1.0)  # median of 1, 0, 2


def test_divergence_median_is_nan_when_never() -> None:
    variants = {"A": {}, "B": {}}
    r = report([ep("A", "x", 0, True, turns=[True]), ep("B", "x", 0, True, turns=[True])], variants)
    d = r.divergence[0]
    assert d.by_turn == () and d.never == 1 and math.isnan(d.median_turn)
    assert r.to_dict()["divergence"][0]["median_turn"] is None


# ---------------------------------------------------------------------------------------- failure modes


def test_failure_modes_counts_shares_and_descriptions() -> None:
    eps = [ep("a", "x", 0, False, mode="wrong_end_state"), ep("a", "y", 0, False, mode="wrong_end_state"),
           ep("a", "z", 0, False, mode="decode_failure"), ep("a", "w", 0, True)]
    r = report(eps, ONE)
    f = r.failure_modes[0]
    assert f.failed == 3
    assert [(m.mode, m.count) for m in f.modes] == [("wrong_end_state", 2), ("decode_failure", 1)]
    assert f.modes[0].share == pytest.approx(2 / 3)
    assert f.modes[0].description == TurnFailureMode.WRONG_END_STATE.description
    md = r.to_markdown()
    assert TurnFailureMode.WRONG_END_STATE.description in md
    assert TurnFailureMode.DECODE_FAILURE.description in md


def test_an_episode_a_steps_error_ended_is_a_failure_named_call_error_as_a_single_turn_call() -> None:

    errored = ep("a", "x", 0, False, turns=[]).episode_with(failure_mode=None, error="turn 0, step 0: bad request",
                                                           details={"error_kind": "bad_request"})
    assert errored.status == "error" and errored.scored and not errored.correct
    r = report([errored, ep("a", "y", 0, True)], ONE)
    assert (r.finished, r.unfinished) == (2, 0)
    (v,) = r.variants
    assert v.accuracy == 0.5  # counted as failed, as a failed single-turn call is counted wrong
    f = r.failure_modes[0]
    assert [(m.mode, m.count) for m in f.modes] == [("call_error", 1)]
    assert "failed for good" in f.modes[0].description and "call_error" in r.to_markdown()


# ------------------------------------------------------------------------------------- native vs prompt


NATIVE_GRID = {
    "p_json": {"call_mode": "prompt", "return_format": "json", "doc_format": "json"},
    "p_xml": {"call_mode": "prompt", "return_format": "xml", "doc_format": "json"},
    "p_pydoc": {"call_mode": "prompt", "return_format": "json", "doc_format": "python"},
    "p_default": {"return_format": "xml", "doc_format": "python"},  # no call_mode: prompt
    "n_json": {"call_mode": "native", "doc_format": "json"},
    "c_json": {"call_mode": "constrained", "return_format": "json", "doc_format": "json"},
}


def test_native_vs_prompt_pairing_and_overall() -> None:
    outcomes = {"p_json": [1, 0, 0, 0], "p_xml": [1, 1, 0, 0], "p_pydoc": [0, 0, 0, 0], "p_default": [1, 1, 1, 1],
                "n_json": [1, 1, 1, 0], "c_json": [1, 1, 1, 1]}
    eps = [ep(v, f"x{i}", 0, bool(o)) for v, os in outcomes.items() for i, o in enumerate(os)]
    r = report(eps, NATIVE_GRID)
    g = r.native_gap[0]
    assert g.available
    # n_json pairs with the prompt variants whose doc_format is json (return_format: native lacks it, wildcard)
    assert [(p.native, p.prompt) for p in g.pairs] == [("n_json", "p_json"), ("n_json", "p_xml")]
    # n_json 3/4; p_json 1/4 -> +0.5; p_xml 2/4 -> +0.25
    assert g.pairs[0].diff == pytest.approx(0.5) and g.pairs[0].entries == 4
    assert g.pairs[1].diff == pytest.approx(0.25)
    assert g.pairs[0].native_rate == pytest.approx(0.75) and g.pairs[0].prompt_rate == pytest.approx(0.25)
    # overall: native 3/4 minus mean of the 4 prompt variants (1/4 + 1/2 + 0 + 1) / 4 = 7/16 -> 5/16;
    # the constrained variant is in neither side
    assert g.overall is not None
    assert (g.overall.natives, g.overall.prompts, g.overall.entries) == (1, 4, 4)
    assert g.overall.diff == pytest.approx(5 / 16)
    lo, hi = g.overall.diff_ci
    assert lo <= 5 / 16 <= hi
    assert "+31.2" in r.to_markdown() or "+31.3" in r.to_markdown()


def test_native_gap_not_available() -> None:
    variants = {"p1": {"call_mode": "prompt", "doc_format": "json"}, "p2": {"call_mode": "prompt"},
                "n1": {"call_mode": "native", "doc_format": "python"}}
    eps = ([ep("p1", "x", 0, True, model="only_prompt"), ep("p2", "x", 0, False, model="only_prompt")]
           + [ep("p1", "x", 0, True, model="unmatched"), ep("n1", "x", 0, False, model="unmatched")])
    r = report(eps, variants)
    gaps = {g.model: g for g in r.native_gap}
    assert not gaps["only_prompt"].available and "no native variant" in gaps["only_prompt"].note
    assert gaps["only_prompt"].overall is None
    # unmatched: n1 (doc python) and p1 (doc json) differ; no pair, but the overall gap exists: 0 - 1
    assert gaps["unmatched"].pairs == () and gaps["unmatched"].note
    assert gaps["unmatched"].overall is not None and gaps["unmatched"].overall.diff == pytest.approx(-1.0)
    assert "not available" in r.to_markdown()


# ------------------------------------------------------------------------------------------------- output


def _sample() -> ConversationReport:
    variants = {"A": {"call_mode": "prompt", "doc_format": "json"}, "B": {"call_mode": "native"}}
    eps = []
    for i, (a, b) in enumerate([([1, 1, 0], [1, 0, 0]), ([1, 1, 1], [1, 1, 1]), ([0, 0, 0], [1, 1, None])]):
        for rep, (va, vb) in enumerate(zip(a, b, strict=True)):
            eps.append(ep("A", f"x{i}", rep, bool(va), turns=[True, bool(va)], cost=0.01, latency=0.5, steps=3))
            eps.append(ep("B", f"x{i}", rep, None if vb is None else bool(vb),
                          turns=[] if vb is None else [bool(vb), bool(vb)], steps=2))
    return report(eps, variants)


def test_markdown_names_both_pass_k_and_explains_tables() -> None:
    r = _sample()
    md = r.to_markdown()
    assert TAU_BENCH_PASS_K in md and TICKET_BENCH_PASS_K in md
    assert "C(c,k)/C(n,k)" in md and "(c/n)^k" in md
    for title in ("Accuracy and pass^k per variant", "pass^k per model", "Paired comparisons",
                  "Accuracy by turn position", "diverge", "Failure modes", "Native vs prompt"):
        assert title in md
    assert md.count("\n_") >= 7  # a line of explanation under every table
    assert "|---" in md  # GitHub tables
    console = r.console()
    assert "tau-bench" in console and "Ticket-Bench" in console and "native - prompt" in console


def test_to_dict_round_trips_through_json() -> None:
    r = _sample()
    d = r.to_dict()
    assert json.loads(json.dumps(d, allow_nan=False)) == d
    assert d["k"] == 2  # B on x2 has 2 finished repeats
    assert d["pass_k_names"] == {"tau_bench": TAU_BENCH_PASS_K, "ticket_bench": TICKET_BENCH_PASS_K}
    assert set(d) >= {"variants", "models", "comparisons", "turn_accuracy", "divergence", "failure_modes",
                      "native_gap", "unfinished", "unfinished_note"}
    v = d["variants"][0]
    assert v["pass_k_tau"]["definition"] == "C(c,k)/C(n,k)" and v["pass_k_ticket"]["definition"] == "(c/n)^k"
    assert len(v["accuracy_ci"]) == 2
    assert d["unfinished"] == 1
    assert v["cost_usd"] == pytest.approx(0.09) and v["mean_steps"] == pytest.approx(3.0)


# ------------------------------------------------------------------------------------------------- errors


def test_unknown_variant_is_refused() -> None:
    with pytest.raises(ValueError, match="'ghost'"):
        report([ep("ghost", "x", 0, True)], ONE)


@pytest.mark.parametrize("k", [0, -1])
def test_k_below_one_is_refused(k: int) -> None:
    with pytest.raises(ValueError, match=f"k={k}"):
        report(repeats("a", "x", [True]), ONE, k=k)


def test_k_above_the_repeats_is_refused_naming_the_entry() -> None:
    eps = repeats("a", "x", [True, True, True]) + repeats("a", "y", [True, None, True])
    assert report(eps, ONE, k=2).k == 2
    with pytest.raises(ValueError, match=r"k=3.*'y'.*2 finished"):
        report(eps, ONE, k=3)


def test_duplicate_episode_is_refused() -> None:
    with pytest.raises(ValueError, match="two episodes"):
        report([ep("a", "x", 0, True), ep("a", "x", 0, False)], ONE)


def test_bad_confidence_is_refused() -> None:
    with pytest.raises(ValueError, match="confidence"):
        report([ep("a", "x", 0, True)], ONE, confidence=1.5)


def test_the_argument_rule_and_the_turns_the_other_rule_scores_otherwise_are_shown() -> None:

    note = {"other_rule": "strict", "valid": False, "failure_mode": "call_refused"}
    verdict = {"argument_rule": "bfcl", "turns": [{"turn": 0, "details": {"argument_rule_disagrees": note}},
                                                  {"turn": 1, "details": {}}]}
    episodes = [ep("a", "c1", 0, True).episode_with(details={"verdict": verdict}),
                ep("a", "c2", 0, False).episode_with(details={"verdict": {"argument_rule": "bfcl", "turns": []}}),
                ep("a", "c3", 0, None)]
    r = report(episodes, ONE)
    assert (r.argument_rules, r.argument_rule_disagreements) == (("bfcl",), 1)
    assert r.to_dict()["argument_rules"] == ["bfcl"] and r.to_dict()["argument_rule_disagreements"] == 1
    assert "arguments: bfcl (lenient); 1 turn(s) the other argument rule scores otherwise" in r.to_markdown()
    assert "arguments: bfcl (lenient)" in r.console()
    old = report([ep("a", "c1", 0, True).episode_with(details={"verdict": {"turns": []}})], ONE)
    assert old.argument_rules == ("strict",) and "arguments: strict;" in old.console()


def test_console_names_ties_as_ties_never_one_variant_as_best_and_worst() -> None:
    variants = {"A": {"call_mode": "prompt"}, "B": {"call_mode": "native"}, "C": {"call_mode": "constrained"}}
    tied = report([ep(v, "x", 0, False) for v in variants], variants)
    assert "all 3 variants tie at 0.0%" in tied.console() and "best" not in tied.console()
    split = report([ep("A", "x", 0, True), ep("B", "x", 0, True), ep("C", "x", 0, False)], variants)
    assert "best A, B (tied) 100.0%, worst C 0.0%" in split.console()
