"""Native and constrained jobs through the runner: what is stored, re-scoring, `unsupported` never sent."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest

from promptgrid.errors import RunError
from promptgrid.matrix.api import Run
from promptgrid.matrix.calling import RequestRenderer
from promptgrid.matrix.cli import main
from promptgrid.matrix.cli.run import print_estimate, print_run
from promptgrid.matrix.running.config import ModelSpec, load_run_config, model_params
from promptgrid.matrix.running.estimate import estimate
from promptgrid.matrix.running.session import Prepared, execute, rescore
from promptgrid.matrix.running.store import RunStore
from promptgrid.matrix.scoring import score
from promptgrid.templates import Renderer
from promptgrid.variants import Variant
from support.builders import numbered_cases
from support.fake_server import FakeServer
from support.running import config

PROMPT = Variant(return_format="json")
NATIVE = Variant(call_mode="native")
JSON = Variant(return_format="json", call_mode="constrained")
PYTHON = Variant(call_mode="constrained")


def prepared(tmp_path: Path, url: str, variants: list[Variant], n: int = 3, constraints: str | None = "openai",
             model: str = "openai/served") -> Prepared:
    spec = ModelSpec(name=model, params=model_params(None, 1), api_base=url, concurrency=4, timeout=30,
                     constraints=constraints)
    return Prepared(config(tmp_path, models=[spec]), "call_modes", variants, numbered_cases(n),
                    RequestRenderer(Renderer()))


def run(prep: Prepared):
    return asyncio.run(execute(prep, scorer=score))


def test_native_answers_are_stored_as_envelopes_and_rescored(tmp_path: Path) -> None:
    with FakeServer.thread() as srv:
        summary = run(prepared(tmp_path, srv.url, [NATIVE, JSON], n=2))
        assert summary.sent == 4 and summary.errors == 0 and summary.unsupported == 0
        assert sum("tools" in r for r in srv.requests()) == 2
        assert sum("response_format" in r for r in srv.requests()) == 2
    with RunStore(tmp_path) as store:
        rows = list(store.rows())
    native = [r for r in rows if r.variant_id == NATIVE.id]
    assert [json.loads(r.response) for r in native] == [
        {"content": None, "tool_calls": [{"name": f"func_{i}", "arguments": "{}"}]} for i in range(2)]
    # The fake calls the right function without arguments: scored by the same checker (missing parameter).
    assert all(r.valid is False and r.failure_mode == "missing_parameter" for r in native)
    constrained = [r for r in rows if r.variant_id == JSON.id]
    assert all(json.loads(r.response)["calls"] and r.failure_mode == "missing_parameter" for r in constrained)
    before = [(r.valid, r.error_code, r.failure_mode) for r in rows]
    stats = rescore(tmp_path)
    assert stats["scored"] == 4 and stats["changed"] == 0
    with RunStore(tmp_path) as store:
        assert [(r.valid, r.error_code, r.failure_mode) for r in store.rows()] == before


def test_unsupported_is_stored_never_sent_and_left_out(tmp_path: Path) -> None:
    variants = [PROMPT, JSON, PYTHON]
    with FakeServer.thread() as srv:
        summary = run(prepared(tmp_path, srv.url, variants))
        # constrained python cannot be sent with a JSON-schema-only constraint: 3 prompt + 3 json calls.
        assert len(srv.requests()) == 6 and summary.sent == 6
        assert summary.unsupported == 3
        (reason,) = summary.unsupported_reasons
        assert "python return format is not JSON" in reason
        again = run(prepared(tmp_path, srv.url, variants))  # a re-run sends nothing, unsupported included
        assert len(srv.requests()) == 6 and again.sent == 0 and again.cached == 6 and again.unsupported == 3
    with RunStore(tmp_path) as store:
        counts = store.counts()
        rows = [r for r in store.rows() if r.variant_id == PYTHON.id]
        tally = {vid: (answered, errors) for _m, vid, _l, answered, _v, errors in store.tally()}
    assert counts["unsupported"] == 3 and counts["pending"] == 0 and counts["errors"] == 0
    assert len(rows) == 3 and all(r.status == "unsupported" and r.error_kind == "unsupported" for r in rows)
    assert all(r.valid is None and r.error == reason and not r.scored and not r.correct for r in rows)
    assert tally[PYTHON.id] == (0, 0) and tally[JSON.id] == (3, 0)
    assert rescore(tmp_path)["errors"] == 0  # re-scoring leaves them without a verdict
    out, err = io.StringIO(), io.StringIO()
    assert print_run(Run(tmp_path, summary=summary), out, err) == 0
    assert "3 jobs not sent: their model cannot do their call mode" in err.getvalue() and reason in err.getvalue()
    assert "unsupported" in out.getvalue()  # the constrained python row of the accuracy table


def test_dry_run_counts_unsupported_apart(tmp_path: Path) -> None:
    prep = prepared(tmp_path, "http://127.0.0.1:9/v1", [PROMPT, JSON, PYTHON])
    (m,) = estimate(prep).models
    assert (m.jobs, m.calls, m.unsupported) == (9, 6, 3)
    out = io.StringIO()
    print_estimate(estimate(prep), out)
    assert "3 jobs would not be sent" in out.getvalue()
    local = estimate(prepared(tmp_path, "", [NATIVE, PYTHON], constraints=None, model="local/x.gguf"))
    assert (local.models[0].calls, local.models[0].unsupported) == (3, 3)  # no llama-cpp needed to tell


def test_unsupported_is_sent_once_the_model_can(tmp_path: Path) -> None:
    with FakeServer.thread() as srv:
        run(prepared(tmp_path, srv.url, [PYTHON], constraints="none"))
        assert srv.requests() == []
        summary = run(prepared(tmp_path, srv.url, [PYTHON], constraints="llama.cpp"))
        assert summary.sent == 3 and summary.unsupported == 0
        assert all("grammar" in r for r in srv.requests())
    with RunStore(tmp_path) as store:
        assert store.counts()["unsupported"] == 0 and {r.status for r in store.rows()} == {"done"}


def test_modes_do_not_share_calls_and_dedupe_within_a_mode(tmp_path: Path) -> None:
    # The same variant twice: one call per case; prompt and constrained json never share a call.
    with FakeServer.thread() as srv:
        summary = run(prepared(tmp_path, srv.url, [PROMPT, JSON, Variant(return_format="json",
                                                                         call_mode="constrained",
                                                                         instruction_language="query")]))
        assert summary.sent == 6 and summary.shared == 3
        assert len(srv.requests()) == 6


def test_constraints_option_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "call_modes", "--dataset", "mini", "--model", "openai/served", "--model", "fake/auto",
            "--api-base", "http://127.0.0.1:9/v1", "--limit", "2", "--run-dir", str(tmp_path), "--dry-run"]
    assert main(argv) == 0
    # An unknown model behind api_base: native is assumed to work, constrained needs a constraints option.
    assert "model openai/served: 8 jobs would not be sent" in capsys.readouterr().out
    assert main([*argv, "--constraints", "vllm"]) == 0  # fake/auto takes no constraints: not applied to it
    assert "would not be sent" not in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--constraints", "grammar"])
    assert exc.value.code == 2 and "invalid choice" in capsys.readouterr().err


def test_constraints_in_a_run_config_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("grid: call_modes\ndataset: mini\nmodels:\n  - name: openai/served\n    constraints: vlm\n")
    with pytest.raises(RunError, match=r"run.yaml:5: models\[0\].constraints: 'vlm' is not one of .*vllm"):
        load_run_config(path)
    path.write_text("grid: call_modes\ndataset: mini\nmodels:\n  - name: openai/served\n    constraints: vllm\n")
    assert load_run_config(path)["models"][0]["constraints"] == "vllm"
    with pytest.raises(RunError, match="constraints applies to litellm models only"):
        ModelSpec(name="local/smollm2-135m", constraints="vllm")


def test_constraints_option_of_the_api(tmp_path: Path) -> None:
    from promptgrid.matrix.api import run as pg_run

    with FakeServer.thread() as srv:
        done = pg_run("call_modes", "mini", models=["openai/served"], api_base=srv.url, constraints="llama.cpp",
                      limit=1, variants=[PYTHON.id], run_dir=tmp_path)
        assert done.summary.sent == 1 and done.summary.unsupported == 0
        assert "grammar" in srv.requests()[0]
    assert done.config["config"]["models"][0]["constraints"] == "llama.cpp"
