"""One front door for both kinds of study: ``Run`` reads either, and the library's functions take either.

Before (issue 32): a conversation run was a ``ConversationRun`` beside ``Run``, ``pg.report`` and
``pg.status`` refused a conversation directory, ``Run.accuracy``/``counts``/``pending`` existed for
single-turn runs only, and ``render RUN_DIR`` refused a single-turn run. Now the kind of a dataset or run
directory is asked in ``promptgrid.matrix.episodes`` only, and these tests hold both kinds to one surface.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import promptgrid as pg
from promptgrid.matrix.episodes import kind_named, kind_of_dataset, kind_of_run

ROOT = Path(__file__).resolve().parents[1]
GT = "fake/ground-truth"
PROMPT = "json->python,False"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    pytest.importorskip("bfcl_eval.eval_checker.multi_turn_eval.func_source_code.travel_booking")
    root = tmp_path_factory.mktemp("runs")
    pg.run("call_modes", "mini-mt:en", models=[GT, "fake/prose"], limit=2, variants=[PROMPT, "native"],
           run_dir=root / "conversations")
    pg.run("demo", "mini:en", models=["fake/auto"], limit=2, run_dir=root / "single")
    return {"conversation": root / "conversations", "single": root / "single"}


def test_the_kind_is_asked_of_the_dataset_or_the_run_directory_and_named_by_run(runs: dict[str, Path]) -> None:
    assert kind_of_dataset("mini-mt:en").name == kind_of_dataset("bfcl:multi_turn_base").name == "conversation"
    assert kind_of_dataset("mini:en").name == kind_of_dataset("bfcl:simple_python").name == "single"
    for name, path in runs.items():
        run = pg.open_run(path)
        assert run.kind == name and kind_of_run(path) is kind_named(name)
    with pytest.raises(ValueError, match="single or conversation"):
        kind_named("both")


def test_one_run_record_answers_the_same_methods_for_both_kinds(runs: dict[str, Path]) -> None:
    single, conversation = pg.open_run(runs["single"]), pg.open_run(runs["conversation"])
    assert type(single) is type(conversation) is pg.Run and pg.ConversationRun is pg.Run
    episodes = conversation.results()
    assert episodes == conversation.episodes() and len(episodes) == 2 * 2 * 2  # models x variants x conversations
    accuracy = conversation.accuracy()  # valid over finished episodes, per model x variant, Wilson interval
    assert [(a.model, a.n) for a in accuracy] == [(GT, 2), (GT, 2), ("fake/prose", 2), ("fake/prose", 2)]
    assert all(a.accuracy == 1.0 and a.ci_low < 1.0 == a.ci_high for a in accuracy if a.model == GT)
    assert all(a.correct == 0 and a.ci_low == 0.0 < a.ci_high for a in accuracy if a.model == "fake/prose")
    assert {a.label for a in accuracy} == {PROMPT, "native"}
    counts = conversation.counts()
    assert counts["episodes"] == counts["finished"] == 8 and counts["valid"] == 4 and counts["unfinished"] == 0
    assert counts["steps"] > 0 and conversation.pending() == 0 and conversation.spend() == 0.0
    assert conversation.meta()["dataset"] == "mini-mt:en" and set(conversation.labels().values()) == {PROMPT, "native"}
    assert single.counts()["jobs"] == 8 and single.pending() == 0 and len(single.accuracy()) == 4
    assert single.meta() == {"grid": "demo", "dataset": "mini:en", "models": ["fake/auto"]}
    assert set(single.labels()) == set(single.variants()) and len(single.variants()) == 4
    assert "conversation report" in conversation.report().console()
    assert single.report().data.shape()  # the single-turn ReportResult, nothing written
    with pytest.raises(pg.RunError, match="single-turn run: its results are jobs"):
        single.episodes()
    with pytest.raises(pg.RunError, match="per-language tables are in its report"):
        single.language_report()
    with pytest.raises(pg.RunError, match="holds no conversation run"):
        pg.open_conversation_run(runs["single"])
    rows = pg.load_results(runs["conversation"])  # one flat row per episode (Run.rows), as compare reads them
    assert rows == conversation.rows() and len(rows) == len(episodes)
    assert [(r.model, r.variant_id, r.case_id, r.repeat, r.valid, r.failure_mode) for r in rows] == \
        [(e.model, e.variant_id, e.conversation_id, e.repeat, e.valid, e.failure_mode) for e in episodes]
    assert {r.label for r in rows} == {PROMPT, "native"} and all(r.status == "done" and r.scored for r in rows)
    assert {r.case_group for r in rows} == {e.template for e in episodes} and single.rows() == single.results()


def test_results_of_either_kind_are_read_by_the_same_code(runs: dict[str, Path]) -> None:
    """``pg.Result``: one class for a job's result and an episode's (``pg.ResultRow`` is the same class); code
    written against it reads both, and ``row()`` is the flat row of each (``Run.rows()``, which adds the
    variant's dimensions and label)."""
    def summary(run: pg.Run) -> dict[tuple[str, str], tuple[int, int, float]]:
        out: dict[tuple[str, str], tuple[int, int, float]] = {}
        for r in run.results():  # no question about the kind
            assert type(r) is pg.Result is pg.ResultRow and r.status in ("done", "error", "pending", "unsupported")
            n, ok, cost = out.get((r.model, r.variant_id), (0, 0, 0.0))
            out[(r.model, r.variant_id)] = (n + r.scored, ok + r.correct, cost + (r.cost_usd or 0.0))
        return out

    single, conversation = pg.open_run(runs["single"]), pg.open_run(runs["conversation"])
    for run in (single, conversation):
        by_variant = summary(run)
        assert by_variant and {(a.model, a.variant_id): (a.n, a.correct) for a in run.accuracy()} == \
            {key: (n, ok) for key, (n, ok, _cost) in by_variant.items()}  # the counts the report's rates take
        def key(row: pg.ResultRow) -> tuple[object, ...]:  # (Run.rows() adds the variant's dimensions and label)
            return row.model, row.variant_id, row.case_id, row.repeat, row.status, row.valid, row.failure_mode

        assert [key(r.row()) for r in run.results()] == [key(r) for r in run.rows()]


def test_report_and_status_take_a_conversation_run_directory(runs: dict[str, Path], tmp_path: Path) -> None:
    result = pg.report(runs["conversation"], tmp_path / "out", formats=["html", "json"])
    assert sorted(p.name for p in result.files) == ["conversations.html", "conversations.json"]
    assert "<svg" in (tmp_path / "out" / "conversations.html").read_text(encoding="utf-8")
    assert "conversation report" in result.console
    nothing = pg.report(pg.open_run(runs["conversation"]))  # a Run, no out: the console only
    assert nothing.files == () and nothing.console == result.console
    with pytest.raises(pg.ReportError, match="md, json or html, not csv"):
        pg.report(runs["conversation"], tmp_path / "csv", formats=["csv"])
    with pytest.raises(pg.ReportError, match="baseline applies to a single-turn report"):
        pg.report(runs["conversation"], baseline=PROMPT)
    with pytest.raises(pg.ReportError, match="this is a single-turn run"):
        pg.report(runs["single"], episodes=["mini_mt_1_en"])
    assert not (tmp_path / "csv").exists()
    status = pg.status(runs["conversation"])
    assert status.kind == "conversation" and status.extra["steps_stored"] > 0
    assert status.to_dict()["models"] == [
        {"model": GT, "episodes": 4, "finished": 4, "valid": 4, "errors": 0, "unfinished": 0,
         "unsupported": 0},
        {"model": "fake/prose", "episodes": 4, "finished": 4, "valid": 0, "errors": 0, "unfinished": 0,
         "unsupported": 0}]
    single = pg.status(runs["single"], poll=False)
    assert single.kind == "single" and single.to_dict()["models"][0]["jobs"] == 8


def test_an_unfinished_episode_is_a_pending_row_and_a_failed_one_keeps_its_turn_s_error_type() -> None:
    from promptgrid.matrix.running.results import Result
    from support.episodes import made_turn

    stopped = Result.episode(model="m", variant_id="v", conversation_id="c1", category="multi_turn_base", repeat=0,
                             valid=None, error="the run stopped: max_cost", template="c", language="de")
    row = stopped.row({"call_mode": "native"}, "native")
    assert (row.status, row.valid, row.scored, row.error, row.message) == \
        ("pending", None, False, None, "the run stopped: max_cost")
    assert (row.case_language, row.case_group, row.dimensions, row.label) == ("de", "c", {"call_mode": "native"},
                                                                              "native")
    failed = Result.episode(model="m", variant_id="v", conversation_id="c1", category="multi_turn_base", repeat=1,
                            valid=False, failure_mode="wrong_end_state",
                           turns=(made_turn(0, True, None, 2, 1), made_turn(1, False, "wrong_end_state", 3, 2)),
                           steps=5, details={"verdict": {"bfcl_error_type": "multi_turn:instance_state_mismatch"}})
    row = failed.row()
    assert (row.status, row.valid, row.scored, row.failure_mode, row.n_predicted_calls, row.attempts) == \
        ("done", False, True, "wrong_end_state", 3, 5)
    assert row.bfcl_error_type == "multi_turn:instance_state_mismatch" and row.error_code is not None


def test_compare_takes_two_conversation_runs(runs: dict[str, Path], tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Before: promptgrid compare read single-turn rows only; two conversation runs are compared per episode,
    paired by conversation, with the single-turn compare's statistics and page."""
    from promptgrid.matrix.cli import main

    other = tmp_path / "noisy"
    pg.run("call_modes", "mini-mt:en", models=["fake/noisy:3"], limit=2, variants=[PROMPT, "native"],
           run_dir=other)
    assert main(["compare", str(runs["conversation"]), str(other), "--out", str(tmp_path / "cmp")]) == 0
    out = capsys.readouterr().out
    assert "fake/ground-truth" in out and "fake/noisy:3" in out and PROMPT in out
    assert (tmp_path / "cmp" / "compare.html").is_file()


def test_api_and_cli_ask_no_question_about_the_kind_of_dataset() -> None:
    """Issue 32's count of branches on the kind of dataset outside datasets/ and episodes/ (12 before)."""
    asked = []
    for path in [ROOT / "matrix" / "api.py", *(ROOT / "matrix" / "cli").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Name) and node.id in ("is_conversation_dataset", "is_conversation_run"):
                asked.append(f"{path.name}:{node.lineno}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "startswith" \
                    and any(isinstance(a, ast.Constant) and str(a.value).startswith(("bfcl:multi", "mini-mt"))
                            for a in node.args):
                asked.append(f"{path.name}:{node.lineno}")
    assert asked == []


def test_both_kinds_run_on_one_engine() -> None:
    """Issue 32's one runner: a single shot's work (``Runner``) and a conversation's (``EpisodeRunner``) are the
    two kinds of work of one engine (``Driver``), and no other module of the library drives a plan of its own
    (walks a planner or installs the signal handlers). ``findings.replay`` walks one offline, over stored
    outcomes, to say what an adaptive goal found: it sends nothing."""
    from promptgrid.matrix.running.conversation_runner import EpisodeRunner
    from promptgrid.matrix.running.runner import Driver, Runner

    assert issubclass(Runner, Driver) and issubclass(EpisodeRunner, Driver)
    engine = ("_drive", "_produce", "_settle", "_work", "_guard", "_open_lane")
    assert [name for name in engine if name in vars(Runner) or name in vars(EpisodeRunner)] == []
    driving = []
    for path in sorted((ROOT / "matrix").rglob("*.py")):
        if path.parent.name == "running" and path.name in ("runner.py", "findings.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                    (node.func.attr == "next" and isinstance(node.func.value, ast.Name)
                     and node.func.value.id == "planner")
                    or (node.func.attr == "install" and isinstance(node.func.value, ast.Name)
                        and node.func.value.id == "signals")):
                driving.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert driving == []


def test_render_of_a_single_turn_run_reads_its_run_json_as_untrusted(runs: dict[str, Path], tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """render RUN_DIR rebuilds prompts from the grid and dataset run.json names: a tampered or broken run.json is
    one error line, never a read of a device or a traceback."""
    import json
    import shutil

    from promptgrid.matrix.cli import main

    copy = tmp_path / "single"
    shutil.copytree(runs["single"], copy)
    record = json.loads((copy / "run.json").read_text(encoding="utf-8"))
    record["config"]["grid"] = "/dev/zero"
    (copy / "run.json").write_text(json.dumps(record), encoding="utf-8")
    capsys.readouterr()
    for text in (None, '{"grid": 5'):
        if text is not None:
            (copy / "run.json").write_text(text, encoding="utf-8")
        assert main(["render", str(copy), "--limit", "1"]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_a_native_plans_estimate_counts_the_tool_schemas_each_call_sends(tmp_path: Path) -> None:
    """The dry run of a native variant counts the tool schemas each request sends beside its messages (as a
    provider bills them): its input tokens are those of the prompts ``pg.render`` gives, request included. They
    were left out, which put a native plan's input at under half of this on mini."""
    from promptgrid.matrix.running.ratelimit import estimate_tokens

    estimate = pg.estimate("call_modes", "mini:en", models=["openai/gpt-4o-mini"], variants=["native"],
                           run_dir=tmp_path / "run")
    sent = list(pg.render("call_modes", "mini:en", variants=["native"]))
    assert len(sent) == estimate.models[0].calls and all(p.request and p.request["tools"] for p in sent)
    messages_only = sum(estimate_tokens(p.messages) + 1 for p in sent)
    assert estimate.models[0].input_tokens == sum(estimate_tokens(p.messages, None, p.request) + 1 for p in sent)
    assert estimate.models[0].input_tokens > 1.5 * messages_only


def test_estimate_says_what_a_run_of_either_kind_would_send_and_what_is_stored(runs: dict[str, Path]) -> None:
    """``pg.estimate`` is ``run --dry-run`` as a value, for both kinds: one ``PlanEstimate``; what the run
    directory holds costs nothing; what ``run`` would refuse is refused."""
    single = pg.estimate("demo", "mini:en", models=["fake/auto", "openai/gpt-4o-mini"], limit=2,
                         run_dir=runs["single"], append=True)
    conversation = pg.estimate("call_modes", "mini-mt:en", models=[GT, "openai/gpt-4o-mini"], limit=2,
                               variants=[PROMPT, "native"], run_dir=runs["conversation"])
    assert isinstance(single, pg.PlanEstimate) and isinstance(conversation, pg.PlanEstimate)
    assert (single.kind, conversation.kind) == ("single", "conversation")
    stored, new = single.models
    assert (stored.jobs, stored.stored, stored.calls) == (8, 8, 0) and new.stored == 0 and new.calls > 0
    stored, new = conversation.models
    assert (stored.jobs, stored.stored, stored.calls) == (4, 4, 0) and new.stored == 0
    assert new.calls >= 2 * 2 and new.input_tokens > 0 and conversation.played == 4
    assert new.cost_input is not None and new.cost_input > 0  # litellm's price of the steps' input tokens
    with pytest.raises(pg.RunError, match="conversation"):  # a single-turn study into a conversation run: refused
        pg.estimate("demo", "mini:en", models=["fake/auto"], limit=2, run_dir=runs["conversation"])
