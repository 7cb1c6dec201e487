"""The public API (``import promptgrid as pg``): the documented example, event loops, silence, read-only runs."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import promptgrid as pg
from promptgrid.matrix.running.store import RunStore

ROOT = Path(__file__).resolve().parents[1]

# The example of issue 11, as written; the child process binds the three names its last line uses.
EXAMPLE = """\
import promptgrid as pg
grid  = pg.load_grid("bfcl_v4")                  # name or YAML path -> Grid (len(), iteration over Variant)
cases = pg.load_dataset("mini:en")               # -> list[Case]
for p in pg.render(grid, cases): ...             # Prompt: variant_id, case_id, messages
run   = pg.run(grid, "mini:en", models=["fake/auto"], run_dir="runs/x", limit=5)   # -> Run
run   = pg.open_run("runs/x")                    # works on a read-only copy too
rows  = run.results()                            # list[ResultRow]
acc   = run.accuracy()                           # rows: model, variant_id, n, correct, accuracy, ci_low, ci_high
pg.report(run, out="report/", formats=["md", "csv", "html"])
v     = pg.score(response_text, variant, case)   # Verdict
"""

PRELUDE = """\
import promptgrid as _pg
variant = next(iter(_pg.load_grid("bfcl_v4")))
case = _pg.load_dataset("mini:en")[0]
response_text = "I cannot help with that."
"""

CHECK = """\
assert len(grid) == 26 and all(isinstance(x, pg.Variant) for x in grid)
assert all(isinstance(c, pg.Case) for c in cases)
assert len(rows) == 26 * 5 and all(isinstance(r, pg.ResultRow) for r in rows)
assert len(acc) == 26 and all(isinstance(a, pg.AccuracyRow) and a.n == 5 for a in acc)
assert isinstance(v, pg.Verdict)
"""

FAST = {"variants": ["python->python,True"], "limit": 2}  # 2 jobs: enough to run, quick


def _readme_example() -> str | None:
    """The first python block of README's "Python API" section (None if there is none)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"^#+ Python API\b.*?```python\n(.*?)```", text, flags=re.S | re.M)
    return m.group(1) if m else None


def _run_child(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONWARNINGS": "error"}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.slow
def test_issue_example_runs_as_written_and_prints_nothing(tmp_path: Path) -> None:
    proc = _run_child(PRELUDE + EXAMPLE + CHECK, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and proc.stderr == ""
    assert (tmp_path / "runs/x/store.sqlite3").is_file() and (tmp_path / "runs/x/run.json").is_file()
    for name in ("report.md", "results.csv", "report.html"):
        assert (tmp_path / "report" / name).is_file(), name


@pytest.mark.slow
def test_readme_example_runs(tmp_path: Path) -> None:
    example = _readme_example()
    assert example is not None, "README.md must have a 'Python API' section with a python block"
    proc = _run_child(PRELUDE + example, tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_import_is_lazy_and_all_is_complete() -> None:
    code = ("import sys, promptgrid as pg; "
            "heavy = sorted(m for m in ('litellm', 'numpy', 'matplotlib') if m in sys.modules); "
            "print(heavy); [getattr(pg, n) for n in pg.__all__]; print('resolved')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["[]", "resolved"]


def test_api_names_are_all_exported() -> None:
    from promptgrid.matrix import api

    assert set(api.__all__) <= set(pg.__all__)
    assert {"load_grid", "load_dataset", "render", "run", "arun", "open_run", "report", "score"} <= set(pg.__all__)
    assert set(pg.__all__) <= set(dir(pg))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        pg.nope  # noqa: B018


def test_render_yields_prompts_for_grid_names_lists_and_specs() -> None:
    grid = pg.load_grid("bfcl_v4")
    cases = pg.load_dataset("mini:en")[:2]
    prompts = list(pg.render(grid, cases))
    assert len(prompts) == 2 * len(grid)
    assert [(p.case_id, p.variant_id) for p in prompts[:2]] == [(cases[0].id, v.id) for v in list(grid)[:2]]
    assert all(isinstance(p, pg.Prompt) and p.messages for p in prompts)
    # a name and a spec, a list of variants, a selection by label: the same prompts
    again = list(pg.render("bfcl_v4", "mini:en", variants=[grid.variants[1].label]))
    assert again[0].messages == prompts[1].messages
    assert [p.messages for p in pg.render(list(grid)[:1], cases)] == [prompts[0].messages, prompts[26].messages]


def test_typed_errors() -> None:
    with pytest.raises(pg.GridError, match="bfcl_v4"):
        pg.load_grid("bfcl_v5")
    with pytest.raises(pg.GridError):
        pg.render("bfcl_v5", "mini:en")
    with pytest.raises(pg.GridError, match="has no variant 'nope'"):
        pg.render("bfcl_v4", "mini:en", variants=["nope"])
    with pytest.raises(pg.DatasetError, match="unknown dataset"):
        pg.load_dataset("minni")
    with pytest.raises(pg.DatasetError):
        pg.run("bfcl_v4", "minni", models=["fake/auto"])
    with pytest.raises(pg.RunError, match="no model"):
        pg.run("bfcl_v4", "mini:en")
    with pytest.raises(pg.RunError, match="no dataset"):
        pg.run("bfcl_v4", models=["fake/auto"])
    with pytest.raises(pg.RunError, match="list of model strings"):
        pg.run("bfcl_v4", "mini:en", models="fake/auto")
    with pytest.raises(pg.RunError, match="not a generation parameter"):
        pg.run("bfcl_v4", "mini:en", models=["fake/auto"], params={"api_key": "sk-x"})
    with pytest.raises(pg.RunError, match="repeats must be >= 1"):
        pg.run("bfcl_v4", "mini:en", models=["fake/auto"], repeats=0)


def test_open_run_needs_a_run_directory(tmp_path: Path) -> None:
    with pytest.raises(pg.RunError, match="not a run directory"):
        pg.open_run(tmp_path)
    (tmp_path / "store.sqlite3").write_text("not a database")
    with pytest.raises(pg.StoreError, match="store.sqlite3 is corrupt or truncated"):  # a RunError
        pg.open_run(tmp_path)


def test_run_prints_nothing_then_resumes(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    run = pg.run("bfcl_v4", "mini:en", models=["fake/auto"], run_dir=tmp_path / "r", **FAST)
    assert capfd.readouterr() == ("", "")
    assert run.summary is not None and run.summary.sent == 2 and run.summary.stopped is None
    assert run.counts()["done"] == 2 and run.config["config"]["models"][0]["name"] == "fake/auto"
    again = pg.run("bfcl_v4", "mini:en", models=["fake/auto"], run_dir=tmp_path / "r", **FAST)
    assert again.summary is not None and again.summary.sent == 0 and again.summary.cached == 2
    assert capfd.readouterr() == ("", "")
    assert pg.open_run(tmp_path / "r").summary is None


def test_progress_goes_to_stderr_only_when_asked(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    pg.run("bfcl_v4", "mini:en", models=["fake/auto"], run_dir=tmp_path / "r", progress=True, **FAST)
    out, err = capfd.readouterr()
    assert out == "" and "2/2 (100%)" in err


def test_run_takes_a_run_config(tmp_path: Path) -> None:
    cfg = tmp_path / "run.yaml"
    cfg.write_text("grid: bfcl_v4\ndataset: mini:en\nlimit: 1\nrun_dir: out\nmodels: [fake/auto]\n"
                   "variants: ['python->python,True']\n")
    run = pg.run(cfg, params={"seed": 3})
    assert run.path == tmp_path / "out" and run.summary is not None and run.summary.sent == 1
    (row,) = run.results()
    assert row.params == {"seed": 3, "temperature": 0.0, "max_tokens": 512}
    config = pg.RunConfig(grid="bfcl_v4", dataset="mini:en", models=(pg.ModelSpec("fake/auto", {"seed": 3}),),
                          run_dir=tmp_path / "out", limit=2, variants=("python->python,True",))
    again = pg.run(config)
    assert again.summary is not None and again.summary.sent == 1 and again.summary.cached == 1


def test_run_inside_a_running_event_loop(tmp_path: Path) -> None:
    async def notebook_cell() -> pg.Run:
        return pg.run("bfcl_v4", "mini:en", models=["fake/auto"], run_dir=tmp_path / "r", **FAST)

    run = asyncio.run(notebook_cell())
    assert run.summary is not None and run.summary.sent == 2 and len(run.results()) == 2


def test_arun(tmp_path: Path) -> None:
    run = asyncio.run(pg.arun("bfcl_v4", "mini:en", models=["fake/auto"], run_dir=tmp_path / "r", **FAST))
    assert run.summary is not None and run.summary.sent == 2
    assert [a.n for a in run.accuracy()] == [2]


def test_max_cost_is_a_result_not_an_exception(tmp_path: Path) -> None:
    run = pg.run("bfcl_v4", "mini:en", models=["fake/auto"], run_dir=tmp_path / "r", **FAST)
    from promptgrid.matrix.running.store import RunStore

    with RunStore(tmp_path / "r") as store:  # pretend the first calls were paid for
        store.db.execute("UPDATE calls SET cost_usd = 1.0")
    run = pg.run("bfcl_v4", "mini:en", models=["fake/auto"], run_dir=tmp_path / "r", max_cost=0.5,
                 variants=FAST["variants"], limit=3)
    assert run.summary is not None and run.summary.stopped == "max_cost" and run.summary.sent == 0
    assert run.spend() == 2.0


def _snapshot(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


@pytest.fixture
def finished_run(tmp_path: Path) -> Path:
    pg.run("bfcl_v4", "mini:en", models=["fake/auto"], run_dir=tmp_path / "r", **FAST)
    return tmp_path / "r"


def test_open_run_on_a_read_only_copy(finished_run: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(finished_run, copy)
    for p in [*copy.iterdir(), copy]:
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        before = _snapshot(copy)
        run = pg.open_run(copy)
        rows = run.results()
        assert len(rows) == 2 and all(r.status == "done" for r in rows)
        assert [(a.n, a.variant_id) for a in run.accuracy()] == [(2, rows[0].variant_id)]
        assert run.counts()["done"] == 2 and run.config["grid_name"] == "bfcl_v4"
        result = pg.report(run, out=tmp_path / "report", formats=["md", "csv"])
        assert (tmp_path / "report" / "report.md").is_file() and result.files
        assert pg.report(copy).console == result.console  # a path works too
        # Nothing written: no -wal/-shm beside the store, every file byte-identical (also as root,
        # where the permission bits alone would not stop a write).
        assert _snapshot(copy) == before
    finally:
        for p in [copy, *copy.iterdir()]:
            p.chmod(p.stat().st_mode | stat.S_IWUSR)


def test_open_run_reads_commits_still_in_the_wal(finished_run: Path) -> None:
    with RunStore(finished_run) as writer:  # a run in progress: its commits are in store.sqlite3-wal
        writer.db.execute("UPDATE jobs SET valid = 1, error_code = 'VALID'")
        assert (finished_run / "store.sqlite3-wal").exists()
        assert {r.valid for r in pg.open_run(finished_run).results()} == {True}


def test_export_and_report_through_the_cli_leave_the_run_untouched(finished_run: Path, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from promptgrid.matrix.cli import main

    before = _snapshot(finished_run)
    assert main(["export", str(finished_run), "--output", str(tmp_path / "rows.jsonl")]) == 0
    assert _snapshot(finished_run) == before
    rows = pg.report(tmp_path / "rows.jsonl").data.cells
    assert [c.n for c in rows] == [2]
    capsys.readouterr()


def test_score_reexport() -> None:
    from promptgrid.matrix.scoring import score

    assert pg.score is score
    grid = pg.load_grid("bfcl_v4")
    case = pg.load_dataset("mini:en")[0]
    verdict = pg.score("no call here", grid.variants[0], case)
    assert verdict.valid is (case.category == "irrelevance")


def test_wrong_argument_types_raise_typed_errors(finished_run: Path, tmp_path: Path) -> None:
    """Before: AttributeError/TypeError from deep inside (``'NoneType' object has no attribute 'startswith'``).
    Now: the API's own error for that argument (RunError, GridError, DatasetError, ReportError), as the API
    already did for ``models="fake/auto"``, naming the argument."""
    grid = pg.load_grid("bfcl_v4")
    case = pg.load_dataset("mini:en")[0]
    with pytest.raises(pg.RunError, match=r"models\[0\] is None"):
        pg.run("bfcl_v4", "mini:en", models=[None], run_dir=tmp_path / "x")
    with pytest.raises(pg.RunError, match=r"models\[1\] is ''"):
        pg.run("bfcl_v4", "mini:en", models=["fake/auto", ""], run_dir=tmp_path / "x")
    with pytest.raises(pg.RunError, match="models must be"):
        pg.run("bfcl_v4", "mini:en", models=5, run_dir=tmp_path / "x")  # type: ignore[arg-type]
    assert not (tmp_path / "x").exists()
    with pytest.raises(pg.RunError, match="path must be a path"):
        pg.open_run(None)  # type: ignore[arg-type]
    with pytest.raises(pg.RunError, match="results must be a path"):
        pg.import_batch(finished_run, None)  # type: ignore[arg-type]
    with pytest.raises(pg.RunError, match="run_dir must be a path"):
        pg.status(None)  # type: ignore[arg-type]
    with pytest.raises(pg.RunError, match="model must be a model string"):
        pg.export_batch(finished_run, None, tmp_path / "o.jsonl")  # type: ignore[arg-type]
    with pytest.raises(pg.GridError, match="variant must be a Variant"):
        pg.score("text", None, case)  # type: ignore[arg-type]
    with pytest.raises(pg.DatasetError, match="case must be a Case"):
        pg.score("text", grid.variants[0], None)  # type: ignore[arg-type]
    with pytest.raises(pg.DatasetError, match="cases must be"):
        list(pg.render(grid, None))  # type: ignore[arg-type]
    with pytest.raises(pg.DatasetError, match="cases must be"):
        list(pg.render(grid, [case, "mini"]))  # type: ignore[list-item]
    with pytest.raises(pg.GridError, match="grid must be"):
        list(pg.render(None, "mini:en"))  # type: ignore[arg-type]
    with pytest.raises(pg.ReportError, match="must be a path"):
        pg.load_results(None)  # type: ignore[arg-type]
    with pytest.raises(pg.ReportError, match="source must be"):
        pg.report(None)  # type: ignore[arg-type]


def test_report_takes_one_format_as_a_string(finished_run: Path, tmp_path: Path) -> None:
    """Before: formats="md" was iterated as "m", "d" (unknown report format 'm')."""
    one = pg.report(finished_run, out=tmp_path / "a", formats="md")
    listed = pg.report(finished_run, out=tmp_path / "b", formats=["md"])
    assert (tmp_path / "a" / "report.md").is_file()
    assert sorted(p.relative_to(tmp_path / "a") for p in one.files) == \
        sorted(p.relative_to(tmp_path / "b") for p in listed.files)
    with pytest.raises(pg.ReportError, match="unknown report format 'nope'"):
        pg.report(finished_run, out=tmp_path / "c", formats="nope")
    with pytest.raises(pg.ReportError, match="formats must be"):
        pg.report(finished_run, out=tmp_path / "c", formats=[1])  # type: ignore[list-item]


@pytest.mark.parametrize("datasets", [5, [5], None, ["mini-mt", 3]])
def test_check_conversation_translations_refuses_what_is_not_a_spec_with_a_typed_error(datasets: object) -> None:
    from promptgrid.errors import TranslationError

    with pytest.raises(TranslationError, match="must be a dataset spec or a list of them"):
        pg.check_conversation_translations(datasets)


@pytest.mark.parametrize("dataset", ["mini-mt:en", "bfcl:multi_turn_base", "jsonl"])
def test_run_and_arun_run_a_conversation_dataset(tmp_path: Path, dataset: str) -> None:
    """Before: pg.run("bfcl_v4", "mini-mt:en", ...) raised "unknown dataset 'mini-mt:en'" (then a RunError pointing
    at run_conversations) although ``promptgrid run`` runs it. Now pg.run, pg.arun and a RunConfig naming the
    dataset run it through the conversation runner and give a ConversationRun."""
    pytest.importorskip("bfcl_eval.eval_checker.multi_turn_eval.func_source_code.travel_booking")
    from promptgrid.matrix.conversations import conversation_to_record, load_conversations

    if dataset == "jsonl":  # a jsonl: file of conversations is recognised by its first record
        path = tmp_path / "conversations.jsonl"
        records = [conversation_to_record(c) for c in load_conversations("mini-mt:en", limit=2)]
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        dataset = f"jsonl:{path}"
    variant = ["python->python,False"]
    first = pg.run("bfcl_v4", dataset, models=["fake/ground-truth"], run_dir=tmp_path / "r", limit=2,
                   variants=variant)
    assert isinstance(first, pg.ConversationRun) and first.path == tmp_path / "r"
    assert isinstance(first.summary, pg.ConversationRunSummary)
    assert (first.summary.episodes, first.summary.valid, first.summary.errors) == (2, 2, 0)
    again = asyncio.run(pg.arun("bfcl_v4", dataset, models=["fake/ground-truth"], run_dir=tmp_path / "r", limit=2,
                                variants=variant))
    assert isinstance(again, pg.ConversationRun) and again.summary.skipped == 2 and again.summary.steps_sent == 0
    config = pg.RunConfig(grid="bfcl_v4", dataset=dataset, run_dir=tmp_path / "c", limit=1, variants=tuple(variant),
                          models=(pg.ModelSpec("fake/ground-truth"),))
    from_config = pg.run(config)
    assert isinstance(from_config, pg.ConversationRun) and from_config.summary.valid == 1


def test_a_conversation_run_offers_the_run_methods(tmp_path: Path) -> None:
    pytest.importorskip("bfcl_eval.eval_checker.multi_turn_eval.func_source_code.travel_booking")
    pytest.importorskip("pandas")
    run = pg.run("call_modes", "mini-mt:en", models=["fake/ground-truth"], limit=2, run_dir=tmp_path)
    assert isinstance(run, pg.ConversationRun) and run.path == tmp_path
    episodes = run.results()
    assert episodes == run.episodes() and len(episodes) == len(pg.load_grid("call_modes")) * 2
    frame = run.to_pandas()
    assert len(frame) == len(episodes)
    assert list(frame[["model", "variant_id", "conversation_id", "repeat"]].itertuples(index=False, name=None)) == \
        [(e.model, e.variant_id, e.conversation_id, e.repeat) for e in episodes]
    assert frame["valid"].dtype == "boolean" and frame["valid"].all()
    assert set(frame["conversation_id"]) == {"mini_mt_1_en", "mini_mt_2_en"}
    assert set(frame["call_mode"]) == {"prompt", "native", "constrained"}
    assert (frame["turns"] == [len(e.turns) for e in episodes]).all() and frame["turns"].min() >= 2
    most = frame["turns"].max()
    assert [c for c in frame.columns if c.startswith("turn_")] == [
        f"turn_{i}_{name}" for i in range(most) for name in ("valid", "failure_mode", "steps", "calls")]
    assert frame["turn_0_valid"].all() and (frame["turn_0_steps"] >= 1).all()
    assert frame["stopped"].isna().all() and run.spend() == 0.0
    report = run.report()
    assert "conversation report" in report.console() and report.to_dict()["finished"] == len(episodes)
    opened = pg.open_conversation_run(tmp_path)
    assert opened.summary is None and len(opened.to_pandas()) == len(episodes)


def test_a_conversation_run_inside_a_running_event_loop(tmp_path: Path) -> None:
    pytest.importorskip("bfcl_eval.eval_checker.multi_turn_eval.func_source_code.travel_booking")

    async def notebook_cell() -> object:
        return pg.run("bfcl_v4", "mini-mt:en", models=["fake/ground-truth"], run_dir=tmp_path, limit=1,
                      variants=["python->python,False"])

    run = asyncio.run(notebook_cell())
    assert isinstance(run, pg.ConversationRun) and run.summary.valid == 1


def test_run_refuses_batch_and_goal_for_a_conversation_dataset_before_writing(tmp_path: Path) -> None:
    for options, named in (({"batch": True}, "batch"), ({"goal": "best-worst"}, "--budget")):
        with pytest.raises(pg.RunError, match=named):
            pg.run("bfcl_v4", "mini-mt:en", models=["fake/ground-truth"], run_dir=tmp_path / "r", **options)
    assert not (tmp_path / "r" / "conversations.sqlite3").exists()


def test_load_dataset_of_a_conversation_spec_says_how_to_run_and_load_it() -> None:
    for spec in ("mini-mt", "mini-mt:de,ja", "bfcl:multi_turn_miss_func"):
        with pytest.raises(pg.DatasetError) as caught:
            pg.load_dataset(spec)
        message = str(caught.value)
        assert f"{spec!r} is a conversation dataset" in message and "Did you mean" not in message
        assert f"pg.run(GRID, {spec!r}, models=[...])" in message and "load_conversations" in message
