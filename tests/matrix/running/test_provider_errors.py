"""Provider errors in a run: Retry-After capped, auth stops a model naming the variable, all-failed exits 1,
missing credentials listed by the dry run (issue 12 item 7)."""

from __future__ import annotations

import asyncio
import io
from dataclasses import replace
from pathlib import Path

import pytest

from promptgrid.errors import RunError
from promptgrid.matrix.api import Run
from promptgrid.matrix.cli import build_parser
from promptgrid.matrix.cli.run import EXIT_CALLS_FAILED, build_config, print_estimate, print_run
from promptgrid.matrix.running.config import ModelSpec, load_run_config, model_params
from promptgrid.matrix.running.estimate import estimate
from promptgrid.matrix.running.session import build_config as session_build_config
from promptgrid.matrix.running.session import execute
from promptgrid.matrix.running.store import RunStore
from support.builders import bfcl_variants, numbered_cases
from support.fake_server import FakeScript, FakeServer
from support.running import config, prepared, stand_in_score


def run(prep, **kw):
    """`promptgrid run` on a prepared run: execute (progress drawn into a buffer), print, pick the exit code."""
    bar = io.StringIO()
    summary = asyncio.run(execute(prep, scorer=stand_in_score, progress=True, progress_stream=bar, **kw))
    out, err = io.StringIO(), io.StringIO()
    code = print_run(Run(prep.config.run_dir, summary=summary), out, err)
    return code, summary, err.getvalue(), bar.getvalue()


def test_retry_after_beyond_the_cap_ends_within_one_cap(tmp_path: Path) -> None:
    # Every call: 429 with Retry-After: 86400. Cap 1 s, 5 retries allowed: each call waits the cap once, and
    # when the server still wants a day the model is stopped (more capped waits cannot satisfy it) and its
    # other jobs stay pending: the run ends after about one cap, not retries x cap.
    with FakeServer.thread(FakeScript(status=429, retry_after_s=86400)) as srv:
        cfg = replace(config(tmp_path, api_base=srv.url, concurrency=2, max_retries=5), retry_after_cap=1.0)
        code, summary, err, bar = run(prepared(cfg, bfcl_variants(3), numbered_cases(4)))
        sent = len(srv.requests())
    assert code == EXIT_CALLS_FAILED
    assert 1.0 <= summary.wall_s < 1.0 + 4  # one wait of the cap, not 5 caps, not a day
    assert sent <= 2 * 2  # the two workers' calls, 2 attempts each; no flood of doomed calls
    why = summary.halted["openai/fake-model"]
    assert "Retry-After" in why and "86400 s" in why and "cap of 1 s" in why and "--retry-after-cap" in why
    assert "stopped after an error every call would repeat: rate limited" in err
    assert "rate_limit: " in err  # the error summary, per kind
    assert "waiting 1 s: rate limited by openai/fake-model (Retry-After 86400 s capped)" in bar
    with RunStore(tmp_path) as store:
        counts = store.counts()
        kinds = {r.error_kind for r in store.rows() if r.error_kind}
    assert kinds == {"rate_limit"} and counts["pending"] >= 12 - 2


def test_retry_after_within_the_cap_is_waited_and_announced(tmp_path: Path) -> None:
    with FakeServer.thread(FakeScript(fail_first=1, fail_first_status=429, retry_after_s=1.1)) as srv:
        cfg = config(tmp_path, api_base=srv.url, concurrency=1)
        code, summary, _, bar = run(prepared(cfg, bfcl_variants(1), numbered_cases(1)))
    assert code == 0 and summary.errors == 0 and not summary.halted
    assert "waiting 1 s: rate limited by openai/fake-model (Retry-After 1.1 s)" in bar


def test_unauthorized_stops_the_model_and_names_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "wrong-key-0000")
    with FakeServer.thread(FakeScript(status=401)) as srv:
        code, summary, err, _ = run(prepared(config(tmp_path, api_base=srv.url, concurrency=1),
                                             bfcl_variants(2), numbered_cases(3)))
        assert len(srv.requests()) == 1  # detected at the first failure, not retried
    assert code == EXIT_CALLS_FAILED and summary.error_kinds == {"auth": 1}
    why = summary.halted["openai/fake-model"]
    assert "Incorrect API key provided" in why and "OPENAI_API_KEY set but refused by the provider" in why
    assert "every call failed (1 of 1), by kind:\n  auth: 1" in err


def test_missing_key_is_auth_at_the_first_call_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No api_base and no OPENAI_API_KEY: the SDK fails before sending anything (litellm reports it as a 500).
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    cfg = config(tmp_path, model="openai/gpt-4o-mini", concurrency=1)
    code, summary, err, _ = run(prepared(cfg, bfcl_variants(2), numbered_cases(2)))
    assert code == EXIT_CALLS_FAILED and summary.sent == 1 and summary.attempts == 1
    assert summary.error_kinds == {"auth": 1}
    assert "OPENAI_API_KEY not set: export it (export OPENAI_API_KEY=...)" in summary.halted["openai/gpt-4o-mini"]
    assert "model openai/gpt-4o-mini: stopped" in err


def test_some_failed_calls_are_data_every_failed_call_is_exit_1(tmp_path: Path) -> None:
    with FakeServer.thread(FakeScript(status=500)) as srv:
        code, summary, err, _ = run(prepared(config(tmp_path, api_base=srv.url, max_retries=1),
                                             bfcl_variants(1), numbered_cases(2)))
    assert code == EXIT_CALLS_FAILED and summary.all_failed and not summary.halted
    assert "every call failed (2 of 2), by kind:\n  server: 2  e.g. InternalServerError" in err
    with FakeServer.thread(FakeScript(status=500)) as bad, FakeServer.thread(FakeScript(answer="text:[f()]")) as ok:
        models = [ModelSpec("openai/down", model_params({}, 1), api_base=bad.url),
                  ModelSpec("openai/up", model_params({}, 1), api_base=ok.url)]
        code, summary, err, _ = run(prepared(config(tmp_path / "mixed", models=models, max_retries=0),
                                             bfcl_variants(1), numbered_cases(2)))
    assert code == 0 and summary.errors == 2 and summary.sent == 4
    assert "2 of 4 calls failed, by kind:\n  server: 2" in err


def test_dry_run_lists_missing_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("MY_SERVER_KEY", raising=False)
    models = [ModelSpec("openai/gpt-4o-mini", model_params({}, 1)),
              ModelSpec("anthropic/claude-3-5-sonnet-20240620", model_params({}, 1)),
              ModelSpec("openai/mine", model_params({}, 1), api_base="http://127.0.0.1:9/v1"),
              ModelSpec("openai/keyed", model_params({}, 1), api_base="http://127.0.0.1:9/v1",
                        api_key_env="MY_SERVER_KEY"),
              ModelSpec("fake/auto", model_params({}, 1))]
    e = estimate(prepared(config(tmp_path, models=models), bfcl_variants(1), numbered_cases(1)))
    assert e.missing_env == {"openai/gpt-4o-mini": ("OPENAI_API_KEY",),
                             "anthropic/claude-3-5-sonnet-20240620": ("ANTHROPIC_API_KEY",),
                             "openai/keyed": ("MY_SERVER_KEY",)}
    out = io.StringIO()
    print_estimate(e, out)
    assert "model openai/gpt-4o-mini: credentials not set: OPENAI_API_KEY. Export them" in out.getvalue()
    monkeypatch.setenv("OPENAI_API_KEY", "x" * 20)
    e = estimate(prepared(config(tmp_path, models=models[:1]), bfcl_variants(1), numbered_cases(1)))
    assert e.missing_env == {}


def test_retry_after_cap_option_flag_and_run_config(tmp_path: Path) -> None:
    args = build_parser().parse_args(["run", "bfcl_v4", "--dataset", "mini", "--model", "fake/auto",
                                      "--retry-after-cap", "5"])
    assert build_config(args).retry_after_cap == 5.0
    assert session_build_config("bfcl_v4", "mini", models=["fake/auto"]).retry_after_cap == 120.0
    for bad in (float("nan"), -1.0):
        with pytest.raises(RunError, match="retry_after_cap .*--retry-after-cap"):
            session_build_config("bfcl_v4", "mini", models=["fake/auto"], retry_after_cap=bad)
    cfg = tmp_path / "run.yaml"
    cfg.write_text("grid: bfcl_v4\ndataset: mini\nretry_after_cap: 30\nmodels: [fake/auto]\n")
    assert load_run_config(cfg)["retry_after_cap"] == 30.0
    built = session_build_config(cfg)
    assert built.retry_after_cap == 30.0 and built.to_dict()["retry_after_cap"] == 30.0
    cfg.write_text("grid: bfcl_v4\ndataset: mini\nretry_after_cap: -3\nmodels: [fake/auto]\n")
    with pytest.raises(RunError, match=r"run.yaml:3: retry_after_cap: must be >= 0"):
        load_run_config(cfg)
