"""End to end on the in-thread fake server through litellm: store, dedup, resume, export."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest

from promptgrid.matrix.api import Run
from promptgrid.matrix.cli.run import print_run
from promptgrid.matrix.running.session import execute
from promptgrid.matrix.running.store import RunStore
from support.builders import bfcl_variants, language_twins, numbered_cases
from support.running import answering_server, config, prepared, stand_in_score


def run(prep, **kw):
    """What `promptgrid run` does with a prepared run: execute it, then print and pick the exit code."""
    summary = asyncio.run(execute(prep, scorer=stand_in_score, **kw))
    out, err = io.StringIO(), io.StringIO()
    code = print_run(Run(prep.config.run_dir, summary=summary), out, err)
    return code, summary, out.getvalue(), err.getvalue()


def test_every_job_stored_and_scored(tmp_path: Path) -> None:
    with answering_server() as srv:
        prep = prepared(config(tmp_path, api_base=srv.url), bfcl_variants(3), numbered_cases(4))
        code, summary, out, err = run(prep)
        assert code == 0, err
        assert summary.sent == 12 and summary.errors == 0
        assert len(srv.requests()) == 12
    with RunStore(tmp_path) as store:
        rows = list(store.rows())
        assert len(rows) == 12
        assert all(r.valid is True and r.status == "done" for r in rows)
        assert {r.case_id for r in rows} == {f"case_{i}" for i in range(4)}
        assert store.counts()["pending"] == 0
    assert "100.0%" in out  # the accuracy table


def test_identical_prompts_sent_once(tmp_path: Path) -> None:
    with answering_server() as srv:
        prep = prepared(config(tmp_path, api_base=srv.url), language_twins(), numbered_cases(5))
        code, summary, _, _ = run(prep)
        assert code == 0
        hashes = srv.sent_hashes()
    assert len(hashes) == 5 and len(set(hashes)) == 5
    assert summary.shared == 5
    with RunStore(tmp_path) as store:
        rows = list(store.rows())
    assert len(rows) == 10
    by_case: dict[str, set[str]] = {}
    for r in rows:
        by_case.setdefault(r.case_id, set()).add(r.key)
    assert all(len(keys) == 1 for keys in by_case.values())  # both variants point to one call


def test_rerun_sends_nothing_and_says_so(tmp_path: Path) -> None:
    with answering_server() as srv:
        prep = prepared(config(tmp_path, api_base=srv.url), bfcl_variants(2), numbered_cases(3))
        run(prep)
        before = len(srv.requests())
        code, summary, out, err = run(prep)
        assert len(srv.requests()) == before
    assert code == 0 and summary.sent == 0 and summary.cached == 6
    assert "nothing to send" in err and "no model calls" in err


def test_resume_sends_only_missing(tmp_path: Path) -> None:
    with answering_server() as srv:
        run(prepared(config(tmp_path, api_base=srv.url), bfcl_variants(2), numbered_cases(3)))
        first = set(srv.sent_hashes())
        # Grow the plan: two more cases. Only their 4 calls may go out.
        code, summary, _, _ = run(prepared(config(tmp_path, api_base=srv.url), bfcl_variants(2), numbered_cases(5)))
        second = srv.sent_hashes()[len(first):]
    assert code == 0 and summary.sent == 4 and summary.cached == 6
    assert len(second) == 4 and not (set(second) & first)


def test_export_fields(tmp_path: Path) -> None:
    from promptgrid.matrix.cli import main

    with answering_server() as srv:
        run(prepared(config(tmp_path, api_base=srv.url), bfcl_variants(2), numbered_cases(2)))
    out = tmp_path / "export.jsonl"
    assert main(["export", str(tmp_path), "--jsonl", "--output", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 4
    required = {"model", "variant_id", "case_id", "repeat", "response", "error", "valid", "error_code",
                "latency_s", "input_tokens", "output_tokens", "cost_usd", "attempts", "finish_reason",
                "dimensions", "label", "case_language", "case_category", "case_group", "bfcl_error_type",
                "schema_version"}
    for r in rows:
        assert required <= set(r), required - set(r)
        assert r["model"] == "openai/fake-model" and r["repeat"] == 0 and r["error"] is None
        assert r["latency_s"] > 0 and r["input_tokens"] > 0 and r["attempts"] == 1
        assert r["dimensions"]["return_format"] in ("python", "json", "verbose_xml", "concise_xml")


def test_repeats_get_their_own_calls_and_seeds(tmp_path: Path) -> None:
    with answering_server() as srv:
        cfg = config(tmp_path, api_base=srv.url, repeats=3, params={"seed": 10})
        code, summary, _, _ = run(prepared(cfg, bfcl_variants(1), numbered_cases(2)))
        reqs = srv.requests()
    assert code == 0 and summary.sent == 6
    assert sorted(r["seed"] for r in reqs) == [10, 10, 11, 11, 12, 12]
    assert {r["temperature"] for r in reqs} == {0.7}  # sampling default when repeating
    with RunStore(tmp_path) as store:
        assert sorted(r.repeat for r in store.rows()) == [0, 0, 1, 1, 2, 2]


def test_second_writer_is_refused(tmp_path: Path) -> None:
    from promptgrid.matrix.running.config import RunError
    from promptgrid.matrix.running.store import RunLock

    with RunLock(tmp_path):
        with pytest.raises(RunError, match="in use by promptgrid pid"):
            RunLock(tmp_path).acquire()
    RunLock(tmp_path).acquire().release()  # free again once released


def test_a_rerun_with_nothing_to_send_makes_no_client_and_scores_no_warm_up(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from promptgrid.matrix import clients as clients_module
    from promptgrid.matrix.running import session

    with answering_server() as srv:
        prep = prepared(config(tmp_path, api_base=srv.url), bfcl_variants(2), numbered_cases(3))
        assert asyncio.run(execute(prep, scorer=stand_in_score)).sent == 6

        def no_client(*args: object, **kwargs: object) -> None:
            raise AssertionError("a rerun with nothing to send made a client")

        def no_warm_up(*args: object, **kwargs: object) -> None:
            raise AssertionError("a rerun with nothing to send scored a warm-up answer")

        monkeypatch.setattr(clients_module, "make_client", no_client)
        monkeypatch.setattr(session, "_warm_up", no_warm_up)
        again = asyncio.run(execute(prepared(config(tmp_path, api_base=srv.url), bfcl_variants(2),
                                             numbered_cases(3)), scorer=stand_in_score))
        assert again.sent == 0 and len(srv.requests()) == 6


@pytest.mark.parametrize("dataset", ["mini:en", "mini-mt:en"])
def test_bad_input_is_rc_2_and_leaves_no_run_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        dataset: str) -> None:
    from promptgrid.matrix.cli import main

    run_dir = tmp_path / "new"
    assert main(["run", "call_modes", "--dataset", dataset, "--limit", "1", "--model", "fake/nosuch",
                 "--run-dir", str(run_dir)]) == 2
    assert "unknown fake model 'fake/nosuch'" in capsys.readouterr().err
    assert not run_dir.exists()
