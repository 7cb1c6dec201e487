"""The fake models (fake/auto, fake/prose, fake/ground-truth, fake/hostile, fake/noisy) on every call mode of
single-turn and conversation datasets, and fake/noisy's errors, determinism and spread."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import promptgrid as pg
from promptgrid.errors import RunError
from promptgrid.matrix.calling import call_request
from promptgrid.matrix.cli import main
from promptgrid.matrix.clients import JobIds, make_client
from promptgrid.matrix.clients._fake import FAKE_MODELS
from promptgrid.matrix.clients._scripted import NOISE_KINDS, NOISY_ERRORS, NOISY_RIGHT, ScriptedClient
from promptgrid.matrix.conversations import load_conversations
from promptgrid.matrix.datasets import load_dataset
from promptgrid.matrix.episodes._steps import EpisodeContext, decode_answer, stored_answer
from promptgrid.records import Case
from promptgrid.variants import CallMode, ReturnFormat, Variant, load_grid

CALL_MODES = load_grid("call_modes").variants
MINI = load_dataset("mini:en").cases


def _answer(client: Any, variant: Variant, case: Case, *, repeat: int = 0, params: dict[str, Any] | None = None,
            kind: str | None = None) -> Any:
    request = call_request(variant, case.functions)
    job = JobIds(variant.id, case.id, repeat, variant, case)
    if kind is not None:
        return client.corrupt(kind, request=request, job=job)
    return asyncio.run(client.complete([], params or {}, request=request, job=job))


def _decode(variant: Variant, case: Case, completion: Any) -> Any:
    """The step's calls as a conversation decodes them (a tuple of ToolCall, or a DecodeFailure)."""
    stored = stored_answer(completion, variant)
    step, _ended = decode_answer(variant, stored, call_request(variant, case.functions), case.functions)
    return step


# --------------------------------------------------------------------------- the registry


def test_every_fake_model_is_made_and_an_unknown_one_is_a_usage_error() -> None:
    assert set(FAKE_MODELS) >= {"fake/auto", "fake/prose", "fake/ground-truth", "fake/hostile", "fake/noisy"}
    for name in (*FAKE_MODELS, "fake/noisy:7", "fake/noisy:7@0.01", "fake/ground-truth@0"):
        assert make_client(name).name == name
    for bad, says in (("fake/bogus", "unknown fake model"), ("fake/ground-truht", "fake/ground-truth"),
                      ("fake/noisy:x", "non-negative integer"), ("fake/noisy:-1", "non-negative integer"),
                      ("fake/auto@soon", "number of seconds"), ("fake/hostile:3", "only fake/noisy takes a seed")):
        with pytest.raises(RunError, match=says) as caught:
            make_client(bad)
        assert caught.value.exit_code == 2


def test_cli_unknown_fake_model_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "call_modes", "--dataset", "mini:en", "--model", "fake/nosy", "--limit", "1",
                 "--run-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and "unknown fake model 'fake/nosy'" in err and "Traceback" not in err
    assert "fake/noisy" in err


# --------------------------------------------------------------------------- every fake, every call mode


def test_every_fake_on_every_call_mode_of_a_single_turn_dataset(tmp_path: Path) -> None:
    run = pg.run("call_modes", "mini:en", models=list(FAKE_MODELS), run_dir=tmp_path / "run", limit=6)
    rows = run.results()
    assert len(rows) == len(FAKE_MODELS) * len(CALL_MODES) * 6
    assert all(row.status == "done" and row.valid is not None for row in rows), \
        [(r.model, r.variant_id, r.error) for r in rows if r.status != "done"]
    accuracy = {(a.model, a.variant_id): a.accuracy for a in run.accuracy()}
    assert all(accuracy["fake/ground-truth", v.id] == 1.0 for v in CALL_MODES)
    assert all(accuracy["fake/hostile", v.id] == 0.0 for v in CALL_MODES)


@pytest.mark.parametrize("dataset", ["mini-mt:en", "bfcl:multi_turn_base"])
def test_every_fake_on_every_call_mode_of_a_conversation_dataset(tmp_path: Path, dataset: str) -> None:
    run = pg.run_conversations("call_modes", dataset, models=list(FAKE_MODELS), run_dir=tmp_path / "run", limit=1)
    episodes = run.episodes()
    assert run.summary.errors == 0 and len(episodes) == len(FAKE_MODELS) * len(CALL_MODES)
    assert all(e.error is None and e.valid is not None for e in episodes), \
        [(e.model, e.variant_id, e.error) for e in episodes if e.error is not None or e.valid is None]
    by_model: dict[str, list[bool | None]] = {}
    for e in episodes:
        by_model.setdefault(e.model, []).append(e.valid)
    assert all(by_model["fake/ground-truth"]) and not any(by_model["fake/prose"]) \
        and not any(by_model["fake/hostile"])
    auto = [e for e in episodes if e.model == "fake/auto"]
    # fake/auto ends each turn after its call's results (two steps), instead of calling up to the step limit
    assert all(e.steps == 2 * len(e.turns) for e in auto), [(e.variant_id, e.steps, len(e.turns)) for e in auto]


def test_cli_runs_fake_auto_natively_on_a_conversation_dataset(tmp_path: Path) -> None:
    """The repro of issue 30: fake/auto took len() of a native assistant message whose content is None."""
    assert main(["run", "call_modes", "--dataset", "bfcl:multi_turn_base", "--model", "fake/auto", "--limit", "1",
                 "--variant", "native", "--run-dir", str(tmp_path / "run"), "--no-progress"]) == 0


# --------------------------------------------------------------------------- fake/noisy


def _case_with(predicate: Any) -> Case:
    return next(case for case in MINI if predicate(case))


def _numeric(case: Case) -> bool:
    return any(isinstance(v[0], (int, float)) and not isinstance(v[0], bool)
               for call in case.ground_truth for params in call.values() for v in params.values()
               if isinstance(v, list) and v)


def _expect(kind: str, variant: Variant, right: Sequence[Any], step: Any) -> None:
    """How each error decodes: what a strict (bfcl-eval) decoder makes of it."""
    decoded = None if not isinstance(step, tuple) else [(c.name, dict(c.arguments)) for c in step]
    fmt, mode = variant.return_format, variant.call_mode
    if kind in ("fence", "prose_prefix"):
        # bfcl-eval's JSON and XML decoders read past a fence or a prefix; its Python decoder does not
        assert decoded == (None if fmt is ReturnFormat.PYTHON else right), (kind, variant.id, step)
    elif kind in ("single_quotes", "truncated_xml", "bad_arguments"):
        assert decoded is None, (kind, variant.id, step)
    elif kind == "prose":
        assert decoded == [], (kind, variant.id, step)
    elif kind == "positional":
        (name, args), = right
        first = next(iter(args))
        assert decoded is not None and decoded[0][0] == name and first not in decoded[0][1]
    elif kind == "number_string":
        assert decoded is not None and len(decoded) == len(right)
        pairs = zip(decoded, right, strict=True)
        changed = [(k, v) for (_, got), (_, want) in pairs for k, v in got.items() if v != want[k]]
        assert len(changed) == 1 and isinstance(changed[0][1], str), (variant.id, decoded, right)
    elif kind == "wrong_value":
        assert decoded is not None and decoded != right and [n for n, _ in decoded] == [n for n, _ in right]
    else:
        assert kind == "wrong_function" and mode is CallMode.CONSTRAINED
        assert decoded is not None and decoded[0][0] != right[0][0]


def test_each_error_kind_is_made_and_decodes_as_a_strict_decoder_would() -> None:
    case = _case_with(lambda c: _numeric(c) and len(c.functions) > 1 and len(c.ground_truth) == 1)
    client = ScriptedClient("fake/noisy")
    made = set()
    for variant in CALL_MODES:
        key = (variant.call_mode, None if variant.call_mode is CallMode.NATIVE else variant.return_format)
        right_step = _decode(variant, case, _answer(ScriptedClient("fake/ground-truth"), variant, case))
        right = [(c.name, dict(c.arguments)) for c in right_step]
        for kind in NOISE_KINDS:
            answer = _answer(client, variant, case, kind=kind)
            if kind not in NOISY_ERRORS[key]:
                continue
            assert answer is not None, (kind, variant.id)
            _expect(kind, variant, right, _decode(variant, case, answer))
            made.add(kind)
    assert made == set(NOISE_KINDS)


def test_noisy_in_a_conversation_corrupts_a_step_of_the_ground_truth() -> None:
    conversation = load_conversations("bfcl:multi_turn_base")[0]
    client = ScriptedClient("fake/noisy")
    for variant in CALL_MODES:
        request = call_request(variant, conversation.functions_at(0), min_calls=0)
        context = EpisodeContext(conversation, variant, 0, 0, request)
        right = [(c.name, dict(c.arguments)) for c in conversation.ground_truth[0]]
        key = (variant.call_mode, None if variant.call_mode is CallMode.NATIVE else variant.return_format)
        for kind in NOISY_ERRORS[key]:
            answer = client.corrupt(kind, request=request, episode=context)
            if answer is None:
                continue
            step, _ = decode_answer(variant, stored_answer(answer, variant), request, conversation.functions_at(0))
            decoded = None if not isinstance(step, tuple) else [(c.name, dict(c.arguments)) for c in step]
            assert decoded != right or kind in ("fence", "prose_prefix"), (kind, variant.id)


def test_noisy_draws_depend_on_the_seed_and_the_repeat_only_when_sampling() -> None:
    def answers(name: str, repeat: int = 0, params: dict[str, Any] | None = None) -> list[str]:
        client = ScriptedClient(name)
        out = []
        for variant in CALL_MODES:
            for case in MINI[:20]:
                c = _answer(client, variant, case, repeat=repeat, params=params)
                out.append(c.text + json.dumps(c.tool_calls))
        return out

    first = answers("fake/noisy")
    assert first == answers("fake/noisy") == answers("fake/noisy:0") == answers("fake/noisy@0")
    assert first != answers("fake/noisy:1")
    assert first == answers("fake/noisy", repeat=1)  # greedy: every repeat the same
    hot = {"temperature": 0.7}
    assert answers("fake/noisy", 0, hot) == answers("fake/noisy", 0, hot) != answers("fake/noisy", 1, hot)


def test_noisy_probabilities_cover_every_call_mode_and_format() -> None:
    keys = {(v.call_mode, None if v.call_mode is CallMode.NATIVE else v.return_format) for v in CALL_MODES}
    assert keys <= set(NOISY_RIGHT) and keys <= set(NOISY_ERRORS)
    assert all(0 < p < 1 for p in NOISY_RIGHT.values())
    assert all(set(mix) <= set(NOISE_KINDS) for mix in NOISY_ERRORS.values())


def _spread(rows: Sequence[Any]) -> tuple[float, dict[str, float]]:
    per: dict[str, list[bool]] = {}
    for row in rows:
        per.setdefault(row.variant_id, []).append(bool(row.valid))
    accuracy = {v: sum(x) / len(x) for v, x in per.items()}
    return 100 * (max(accuracy.values()) - min(accuracy.values())), accuracy


def test_noisy_runs_repeat_exactly_and_spread_the_variants_single_turn(tmp_path: Path) -> None:
    def run(name: str, where: str) -> list[Any]:
        rows = pg.run("call_modes", "mini:en", models=[name], run_dir=tmp_path / where, concurrency=4).results()
        return sorted(rows, key=lambda r: (r.variant_id, r.case_id))

    first, again, other = run("fake/noisy", "a"), run("fake/noisy", "b"), run("fake/noisy:1", "c")
    assert [(r.response, r.valid) for r in first] == [(r.response, r.valid) for r in again]
    assert [r.response for r in first] != [r.response for r in other]
    for rows in (first, other):
        spread, accuracy = _spread(rows)
        assert spread >= 20, accuracy
        assert 0.3 < sum(bool(r.valid) for r in rows) / len(rows) < 0.95


def test_noisy_spreads_the_variants_of_a_conversation_dataset(tmp_path: Path) -> None:
    run = pg.run_conversations("call_modes", "bfcl:multi_turn_base", models=["fake/noisy"], limit=12,
                               run_dir=tmp_path / "run")
    per: dict[str, list[bool]] = {}
    for e in run.episodes():
        assert e.error is None
        per.setdefault(e.variant_id, []).append(bool(e.valid))
    accuracy = {v: sum(x) / len(x) for v, x in per.items()}
    assert 100 * (max(accuracy.values()) - min(accuracy.values())) >= 20, accuracy


def test_noisy_conversation_repeats_vary_only_when_sampling(tmp_path: Path) -> None:
    """The runner passes the repeat (``EpisodeContext.repeat``): at the default temperature of a run with repeats
    (0.7) the repeats differ, at temperature 0 they are the same."""
    def pairs(where: str, **options: Any) -> list[bool]:
        run = pg.run_conversations("call_modes", "bfcl:multi_turn_base", models=["fake/noisy"], limit=4, repeats=2,
                                   run_dir=tmp_path / where, **options)
        ep = {(e.variant_id, e.conversation_id, e.repeat): (e.valid, e.steps) for e in run.episodes()}
        return [ep[v, c, 0] != ep[v, c, 1] for v, c, r in ep if r == 0]

    assert any(pairs("sampled")) and not any(pairs("greedy", params={"temperature": 0}))
