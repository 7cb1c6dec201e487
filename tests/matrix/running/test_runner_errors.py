"""Retries, Retry-After, final errors, faults, --max-cost, --retry-errors, re-scoring."""

from __future__ import annotations

import asyncio
import io
import json
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from promptgrid.matrix.api import Run
from promptgrid.matrix.cli.run import EXIT_CALLS_FAILED, EXIT_MAX_COST, print_estimate, print_run
from promptgrid.matrix.running.estimate import estimate
from promptgrid.matrix.running.session import execute, rescore
from promptgrid.matrix.running.store import RunStore
from support.builders import bfcl_variants, language_twins, numbered_cases
from support.fake_server import FakeScript, FakeServer
from support.running import StandInVerdict, answer_right, answering_server, config, prepared, stand_in_score


def run(prep, scorer=stand_in_score, **kw):
    """What `promptgrid run` does with a prepared run: execute it, then print and pick the exit code."""
    summary = asyncio.run(execute(prep, scorer=scorer, **kw))
    out, err = io.StringIO(), io.StringIO()
    code = print_run(Run(prep.config.run_dir, summary=summary), out, err)
    return code, summary, out.getvalue(), err.getvalue()


def test_retry_after_is_honoured(tmp_path: Path) -> None:
    script = FakeScript(fail_first=1, fail_first_status=429, retry_after_s=0.4)
    with FakeServer.thread(script, answer_fn=answer_right) as srv:
        code, summary, _, _ = run(prepared(config(tmp_path, api_base=srv.url, backoff=0.001),
                                           bfcl_variants(2), numbered_cases(3)))
        reqs = srv.requests()
    assert code == 0 and summary.errors == 0 and summary.attempts == 12
    times: dict[str, dict[int, float]] = defaultdict(dict)
    for r in reqs:
        times[r["hash"]][r["n"]] = r["t"]
    assert len(times) == 6
    for t in times.values():
        assert t[1] - t[0] >= 0.4  # never earlier than the server asked (backoff alone would be ~1 ms)
    with RunStore(tmp_path) as store:
        assert {r.attempts for r in store.rows()} == {2}


def test_non_retryable_error_recorded_once(tmp_path: Path) -> None:
    with FakeServer.thread(FakeScript(status=400)) as srv:
        prep = prepared(config(tmp_path, api_base=srv.url), bfcl_variants(2), numbered_cases(2))
        code, summary, out, err = run(prep)
        assert code == EXIT_CALLS_FAILED  # every call failed: the command failed, and says why
        assert "every call failed (4 of 4), by kind:\n  bad_request: 4  e.g. BadRequestError" in err
        assert len(srv.requests()) == 4 and summary.errors == 4
        assert "--retry-errors" in err
        with RunStore(tmp_path) as store:
            rows = list(store.rows())
        assert all(r.status == "error" and r.error_kind == "bad_request" and r.attempts == 1
                   and r.valid is False and r.response is None and "Bad request" in r.error for r in rows)
        # Final errors are final: a plain re-run sends nothing...
        run(prep)
        assert len(srv.requests()) == 4
        # ... --retry-errors sends each errored call once more.
        _, summary, _, _ = run(prep, retry_errors=True)
        assert len(srv.requests()) == 8 and summary.sent == 4


def test_retry_errors_replaces_error_with_answer(tmp_path: Path) -> None:
    with FakeServer.thread(FakeScript(status=500)) as srv:
        prep = prepared(config(tmp_path, api_base=srv.url, max_retries=1), bfcl_variants(1), numbered_cases(2))
        run(prep)
    with RunStore(tmp_path) as store:
        assert [r.attempts for r in store.rows()] == [2, 2]
        assert store.counts()["transient_errors"] == 2
    with answering_server() as srv:
        prep = prepared(config(tmp_path, api_base=srv.url), bfcl_variants(1), numbered_cases(2))
        run(prep, retry_errors=True)
    with RunStore(tmp_path) as store:
        rows = list(store.rows())
    assert [(r.status, r.valid, r.error) for r in rows] == [("done", True, None)] * 2


@pytest.mark.slow
def test_faults_every_job_ends_answered_or_with_final_error(tmp_path: Path) -> None:
    script = FakeScript(p_rate_limit=0.20, retry_after_s=0.2, p_server_error=0.05, p_hang=0.02, hang_s=60,
                        p_malformed=0.02, latency_s=0.005, seed=7)
    n_cases, n_variants = 40, 25  # 1,000 jobs
    with FakeServer.subprocess(script) as srv:
        prep = prepared(config(tmp_path, api_base=srv.url, concurrency=64, timeout=3.0, backoff=0.02,
                               max_retries=6), bfcl_variants(n_variants), numbered_cases(n_cases))
        code, summary, _, err = run(prep)
        reqs = srv.requests()
    assert code == 0, err
    outcomes = Counter(r["outcome"] for r in reqs)
    assert outcomes["status_429"] > 150 and outcomes["status_500"] > 30 and outcomes["hang"] > 10
    assert outcomes["malformed"] > 10
    with RunStore(tmp_path) as store:
        counts = store.counts()
        rows = list(store.rows())
    assert counts["jobs"] == 1000 and counts["pending"] == 0
    assert counts["done"] + counts["errors"] == 1000
    assert len(rows) == 1000
    for r in rows:
        assert (r.response is not None) != (r.error is not None)
    print(f"\nfaults: {dict(outcomes)}; jobs done {counts['done']}, final errors {counts['errors']}, "
          f"attempts {summary.attempts}, {summary.exec_s:.1f} s")
    assert counts["done"] >= 990  # 6 retries: a job fails for good with probability ~0.3**7
    assert summary.attempts >= len(reqs)  # a timeout can fire before a starved request is even sent


def test_max_cost_stops_cleanly(tmp_path: Path) -> None:
    # gpt-4o-mini is priced in litellm's bundled map; the fake server reports usage.
    with answering_server() as srv:
        prep = prepared(config(tmp_path, api_base=srv.url, model="openai/gpt-4o-mini", concurrency=1),
                        bfcl_variants(4), numbered_cases(5))
        code, summary, _, _ = run(prep)
        with RunStore(tmp_path) as store:
            per_call = store.spend() / 20
        assert per_call > 0
    limit = per_call * 5.5
    run_dir = tmp_path / "capped"
    with answering_server() as srv:
        prep = prepared(config(run_dir, api_base=srv.url, model="openai/gpt-4o-mini", concurrency=2,
                               max_cost=limit), bfcl_variants(4), numbered_cases(5))
        code, summary, out, err = run(prep)
        assert code == EXIT_MAX_COST and summary.stopped == "max_cost"
        assert "--max-cost" in err
        with RunStore(run_dir) as store:
            spent = store.spend()
            assert spent <= limit + per_call * 1.01  # projected before sending: at most one call over
            assert 4 <= store.counts()["calls"] <= 6
            assert store.counts()["pending"] > 0
        sent = len(srv.requests())
        code, summary, _, _ = run(prep)  # same limit: nothing more is sent
        assert code == EXIT_MAX_COST and len(srv.requests()) == sent


def test_dry_run_counts_and_sends_nothing(tmp_path: Path) -> None:
    with answering_server() as srv:
        run(prepared(config(tmp_path, api_base=srv.url, model="openai/gpt-4o-mini"), language_twins(),
                     numbered_cases(2)))
        before = len(srv.requests())
        out = io.StringIO()
        totals = estimate(prepared(config(tmp_path, api_base=srv.url, model="openai/gpt-4o-mini"),
                                   language_twins(), numbered_cases(5)))
        print_estimate(totals, out)
        assert len(srv.requests()) == before
    # 5 cases x 2 twin variants: 4 jobs stored, 3 new prompts, 3 jobs share a new prompt.
    assert totals.jobs == 10 and totals.stored == 4 and totals.calls == 3 and totals.shared == 3
    assert totals.input_tokens > 0 and totals.output_tokens_max == 3 * 512
    assert 0 < totals.cost_input < totals.cost_max
    text = out.getvalue()
    assert "dry run" in text and "10 jobs" in text and "3 calls to send" in text


def test_rescore_offline(tmp_path: Path) -> None:
    with answering_server() as srv:
        run(prepared(config(tmp_path, api_base=srv.url), bfcl_variants(2), numbered_cases(3)))
        n = len(srv.requests())

        def strict(response, variant, case):  # a "fixed checker": nothing is valid any more
            return StandInVerdict(False)

        stats = rescore(tmp_path, scorer=strict)
        assert len(srv.requests()) == n  # no model calls
    assert stats == {"scored": 6, "changed": 6, "errors": 0, "failed": 0}
    with RunStore(tmp_path) as store:
        assert {r.valid for r in store.rows()} == {False}


def test_scorer_crash_keeps_answer_unscored(tmp_path: Path) -> None:
    def broken(response, variant, case):
        raise ZeroDivisionError("checker bug")

    with answering_server() as srv:
        code, summary, _, err = run(prepared(config(tmp_path, api_base=srv.url), bfcl_variants(1),
                                             numbered_cases(2)), scorer=broken)
    assert code == 0 and summary.score_failures == 2
    assert "ZeroDivisionError: checker bug" in err and "promptgrid score" in err
    with RunStore(tmp_path) as store:
        assert [r.valid for r in store.rows()] == [None, None]
        assert all(r.response for r in store.rows())
    assert rescore(tmp_path, scorer=stand_in_score)["scored"] == 2
    with RunStore(tmp_path) as store:
        assert [r.valid for r in store.rows()] == [True, True]


def test_run_json_has_config_and_no_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-planted-xyz")
    with answering_server() as srv:
        run(prepared(config(tmp_path, api_base=srv.url), bfcl_variants(1), numbered_cases(1)))
    data = json.loads((tmp_path / "run.json").read_text())
    assert data["config"]["models"][0]["params"] == {"temperature": 0.0, "max_tokens": 512}
    assert data["invocations"][-1]["summary"]["sent"] == 1
    assert "sk-planted" not in (tmp_path / "run.json").read_text()


def test_rpm_limit_paces_calls(tmp_path: Path) -> None:
    from dataclasses import replace

    with answering_server() as srv:
        cfg = config(tmp_path, api_base=srv.url, concurrency=16)
        cfg = replace(cfg, models=(replace(cfg.models[0], rpm=600),))  # 10/s, burst of 10
        code, summary, _, _ = run(prepared(cfg, bfcl_variants(5), numbered_cases(5)))
        times = sorted(r["t"] for r in srv.requests())
    assert code == 0 and len(times) == 25
    # 10 at once, then 15 more at 10/s: ideally 1.5 s. Unpaced, 25 calls at
    # concurrency 16 take well under 0.3 s; the bound leaves room for a loaded
    # machine delaying the first burst's arrival.
    assert times[-1] - times[0] >= 1.0


def test_store_failure_stops_the_run_instead_of_hanging(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlite3

    calls = {"n": 0}
    real = RunStore.record_all  # the runner's commit (the results of one turn of its loop)

    def flaky(self, entries):
        calls["n"] += 1
        if calls["n"] == 3:  # an unexpected failure (a full disk is handled: test_store_robustness)
            raise sqlite3.OperationalError("disk I/O error")
        return real(self, entries)

    monkeypatch.setattr(RunStore, "record_all", flaky)
    with answering_server() as srv:
        prep = prepared(config(tmp_path, api_base=srv.url, concurrency=2), bfcl_variants(5), numbered_cases(10))
        with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
            run(prep)
    with RunStore(tmp_path) as store:
        assert store.counts()["calls"] >= 2  # what was stored stays stored


def test_bad_key_stops_that_model_not_the_run(tmp_path: Path) -> None:
    from promptgrid.matrix.running.config import ModelSpec, model_params

    with FakeServer.thread(FakeScript(status=401)) as bad, FakeServer.thread(FakeScript(),
                                                                              answer_fn=answer_right) as good:
        models = [ModelSpec("openai/bad-key", model_params({}, 1), api_base=bad.url, concurrency=2),
                  ModelSpec("openai/fine", model_params({}, 1), api_base=good.url, concurrency=2)]
        prep = prepared(config(tmp_path, models=models), bfcl_variants(4), numbered_cases(5))
        code, summary, _, err = run(prep)
        assert code == 1 and list(summary.halted) == ["openai/bad-key"]
        assert len(bad.requests()) <= 2 and len(good.requests()) == 20  # no flood of doomed calls
        assert "openai/bad-key: stopped after an error every call would repeat" in err and "--retry-errors" in err
    with RunStore(tmp_path) as store:
        counts = store.counts()
    assert counts["done"] == 20 and counts["pending"] >= 18
