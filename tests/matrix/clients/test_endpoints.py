"""Several endpoints per model (vLLM replicas): config, spreading over fake servers, failover, the direct path."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sqlite3
from pathlib import Path

import pytest

from promptgrid.errors import RunError
from promptgrid.matrix.clients import make_client
from promptgrid.matrix.clients._litellm import LiteLLMClient
from promptgrid.matrix.report import aggregate
from promptgrid.matrix.report._markdown import markdown_report
from promptgrid.matrix.running.config import ModelSpec, load_run_config, model_params
from promptgrid.matrix.running.session import build_config, execute
from promptgrid.matrix.running.store import RunStore
from support.builders import bfcl_variants, numbered_cases
from support.fake_server import FakeScript, FakeServer
from support.running import answer_right, config, prepared, stand_in_score

#: Nothing listens here: a connection is refused at once (an endpoint that is down).
DOWN = "http://127.0.0.1:9/v1"
MSGS = [{"role": "user", "content": "Please call func_1 with x=1."}]


def _spec(*urls: str, concurrency: int = 2) -> ModelSpec:
    return ModelSpec("openai/fake-model", model_params({}, 1), api_bases=urls, concurrency=concurrency, timeout=30)


def _run(tmp_path: Path, spec: ModelSpec, cases: int = 12, variants: int = 2) -> list[dict]:
    """Run ``spec`` on ``variants x cases`` jobs; the stored calls."""
    prep = prepared(config(tmp_path, models=[spec], max_retries=2), bfcl_variants(variants), numbered_cases(cases))
    asyncio.run(execute(prep, scorer=stand_in_score))
    with RunStore(tmp_path, readonly=True) as store:
        return [{"key": k, "status": s, "endpoint": e, "attempts": a}
                for k, s, e, a in store.db.execute("SELECT key, status, endpoint, attempts FROM calls")]


# --------------------------------------------------------------------------- config


def _write(tmp_path: Path, model_yaml: str) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(f"grid: bfcl_v4\ndataset: mini\nmodels:\n  - name: openai/served\n{model_yaml}")
    return path


def test_api_base_list_in_a_run_config(tmp_path: Path) -> None:
    path = _write(tmp_path, "    api_base: [http://h1:8000/v1, http://h2:8000/v1]\n    concurrency: 4\n")
    spec = build_config(path).models[0]
    assert spec.api_bases == ("http://h1:8000/v1", "http://h2:8000/v1") and spec.api_base == "http://h1:8000/v1"
    assert spec.concurrency == 4 and spec.in_flight == 8  # concurrency is per endpoint
    one = build_config(_write(tmp_path, "    api_base: http://h1:8000/v1\n")).models[0]
    assert one.api_bases == ("http://h1:8000/v1",) and one.in_flight == one.concurrency
    assert build_config(_write(tmp_path, "    concurrency: 3\n")).models[0].api_bases == ()


@pytest.mark.parametrize(("value", "line"), [
    ("[http://h1/v1, 3]", "models[0].api_base[1]: expected a URL string"),
    ("[http://h1/v1, h2:8000/v1]", "models[0].api_base[1]: 'h2:8000/v1' is not an http(s) URL"),
    ("[http://h1/v1, http://h1/v1/]", "models[0].api_base[1]: 'http://h1/v1/' is listed twice"),
    ("[]", "models[0].api_base: empty list"),
    ("ftp://h1/v1", "models[0].api_base: 'ftp://h1/v1' is not an http(s) URL"),
    ("{a: 1}", "models[0].api_base: expected a URL or a list of URLs"),
])
def test_api_base_errors_name_file_line_and_key(tmp_path: Path, value: str, line: str) -> None:
    path = _write(tmp_path, f"    api_base: {value}\n")
    with pytest.raises(RunError) as info:
        load_run_config(path)
    assert str(info.value).startswith(f"{path}:5: {line}")


def test_credentials_in_urls_never_reach_run_json_nor_errors(tmp_path: Path) -> None:
    cfg = build_config("bfcl_v4", "mini", models=["openai/served"], run_dir=tmp_path,
                       api_base=["https://h1/v1?key=s3cret-pass", "https://h2/v1?api_key=s3cret-key"])
    assert cfg.models[0].api_bases[1] == "https://h2/v1?api_key=s3cret-key"  # the call keeps the full URL
    text = json.dumps(cfg.to_dict())
    assert "s3cret" not in text and text.count("[REDACTED]") == 3  # api_base (the first) and both api_bases
    with pytest.raises(RunError) as info:
        build_config("bfcl_v4", "mini", models=["openai/served"], api_base=["https://h1/v1", "h2?key=s3cret"])
    assert "s3cret" not in str(info.value) and "is not an http(s) URL" in str(info.value)
    with pytest.raises(RunError) as info:  # user info cannot go beside the key's header: refused, never sent
        build_config("bfcl_v4", "mini", models=["openai/served"], api_base=["https://u:s3cret@h1/v1", "http://h2"])
    assert "s3cret" not in str(info.value) and "user name or password" in str(info.value)


def test_run_config_round_trips_through_model_spec_dicts(tmp_path: Path) -> None:
    cfg = build_config("bfcl_v4", "mini", models=["openai/served"], run_dir=tmp_path,
                       api_base=["http://h1/v1", "http://h2/v1"], concurrency=3)
    again = build_config(cfg)
    assert again.models == cfg.models and again.models[0].in_flight == 6
    assert build_config(cfg, api_base="http://h3/v1").models[0].api_bases == ("http://h3/v1",)
    with pytest.raises(RunError, match="not the first of api_bases"):
        ModelSpec("openai/x", api_base="http://a/v1", api_bases=("http://b/v1",))


# --------------------------------------------------------------------------- the client


def test_one_endpoint_is_the_direct_path(monkeypatch: pytest.MonkeyPatch) -> None:
    client = make_client("openai/fake-model", api_base="http://127.0.0.1:9/v1")
    assert isinstance(client, LiteLLMClient) and client._router is None

    def no_router(*_a: object, **_k: object) -> None:
        raise AssertionError("one endpoint must not build a Router")

    monkeypatch.setattr(client._lt, "Router", no_router)
    with FakeServer.thread(FakeScript(), answer_fn=answer_right) as srv:
        client = make_client("openai/fake-model", api_base=srv.url)
        c = asyncio.run(client.complete(MSGS, {"temperature": 0, "max_tokens": 16}))
    assert c.text == "[func_1(x=1)]" and c.endpoint == srv.url
    assert asyncio.run(make_client("openai/gpt-4o-mini").complete(
        MSGS, {"mock_response": "hi", "api_key": "sk-test-not-real"})).endpoint is None  # provider's default


def test_router_callbacks_leave_litellm_on_aclose() -> None:
    client = make_client("openai/fake-model", api_base=["http://h1/v1", "http://h2/v1"])
    lt = client._lt
    hooks = ("callbacks", "input_callback", "success_callback", "failure_callback", "_async_success_callback",
             "_async_failure_callback")
    before = {name: len(getattr(lt, name)) for name in hooks}
    router = client._router
    assert router is not None
    asyncio.run(client.aclose())
    assert not any(h is router for name in hooks for h in getattr(lt, name))
    assert all(len(getattr(lt, name)) <= before[name] for name in hooks)


def test_least_busy_counts_a_call_from_its_choice_and_rotates_ties() -> None:
    from promptgrid.matrix.clients._router import LeastBusy

    deployments = [{"model_info": {"id": x}} for x in "abc"]
    strategy = LeastBusy(deployments)
    first = [LeastBusy.id(strategy.choose()) for _ in range(6)]  # nothing answered yet: 2 each, not 6 on "a"
    assert sorted(first) == ["a", "a", "b", "b", "c", "c"]
    strategy.release("b")
    assert LeastBusy.id(strategy.choose()) == "b"
    strategy.cool_down("b")
    strategy.release("a")
    strategy.release("c")
    assert {LeastBusy.id(strategy.choose()) for _ in range(2)} == {"a", "c"}  # b is cooling down
    for key in "abc":
        strategy.cool_down(key)
    strategy.back_at["c"] -= 1
    assert LeastBusy.id(strategy.choose()) == "c"  # every one down: the one back soonest is tried


def test_key_in_an_endpoint_url_is_redacted_from_the_recorded_endpoint() -> None:
    with FakeServer.thread(FakeScript(), answer_fn=answer_right) as a, \
            FakeServer.thread(FakeScript(), answer_fn=answer_right) as b:
        client = make_client("openai/fake-model", api_base=[a.url + "?api_key=s3cret-key", b.url])
        seen = {asyncio.run(client.complete([{"role": "user", "content": f"call func_{i} with x={i}"}],
                                            {"max_tokens": 8})).endpoint for i in range(12)}
        asyncio.run(client.aclose())
    assert seen <= {a.url + "?api_key=[REDACTED]", b.url}


def test_a_5xx_fails_over_a_rate_limit_goes_back_to_the_runner() -> None:
    from promptgrid.matrix.clients import ErrorKind, RetryableError

    def ask(client: LiteLLMClient, i: int) -> object:
        return asyncio.run(client.complete([{"role": "user", "content": f"call func_{i} with x={i}"}],
                                           {"max_tokens": 8}))

    with FakeServer.thread(FakeScript(p_server_error=1.0)) as broken, \
            FakeServer.thread(FakeScript(), answer_fn=answer_right) as fine:
        client = make_client("openai/fake-model", api_base=[broken.url, fine.url])
        assert {ask(client, i).endpoint for i in range(8)} == {fine.url}
        asyncio.run(client.aclose())
        assert len(broken.requests()) == 1  # cooled down after its first 500, before the call went on
    with FakeServer.thread(FakeScript(p_rate_limit=1.0)) as a, FakeServer.thread(FakeScript(p_rate_limit=1.0)) as b:
        client = make_client("openai/fake-model", api_base=[a.url, b.url])
        with pytest.raises(RetryableError) as info:
            ask(client, 1)
        asyncio.run(client.aclose())
        assert info.value.kind is ErrorKind.RATE_LIMIT and info.value.endpoint in (a.url, b.url)
        assert len(a.requests()) + len(b.requests()) == 1  # the runner waits out a 429: no failover


# --------------------------------------------------------------------------- runs


def test_calls_are_spread_over_both_endpoints(tmp_path: Path) -> None:
    script = FakeScript(latency_s=0.05)
    with FakeServer.thread(script, answer_fn=answer_right) as a, FakeServer.thread(script, answer_fn=answer_right) as b:
        calls = _run(tmp_path, _spec(a.url, b.url))
        served = {a.url: len(a.requests()), b.url: len(b.requests())}
    assert len(calls) == 24 and all(c["status"] == "done" for c in calls)
    assert sum(served.values()) == 24 and min(served.values()) >= 6  # least-busy: both get a fair share
    recorded = {url: sum(c["endpoint"] == url for c in calls) for url in served}
    assert recorded == served  # the store says which endpoint answered each call
    with RunStore(tmp_path, readonly=True) as store:
        rows = list(store.rows())
    assert {r.endpoint for r in rows} == {a.url, b.url}
    assert {r.to_dict()["endpoint"] for r in rows} == {a.url, b.url}  # and so does the export
    data = aggregate(rows, n_resamples=100)
    assert [(e.endpoint, e.calls, e.errors) for e in data.endpoints] == [
        (url, served[url], 0) for url in sorted(served)]
    text = markdown_report(data)
    assert "Calls per endpoint" in text and a.url in text
    one = [dataclasses.replace(r, endpoint=a.url) for r in rows]
    assert aggregate(one, n_resamples=100).endpoints == ()  # one endpoint: no table
    assert "Calls per endpoint" not in markdown_report(aggregate(one, n_resamples=100))


def test_endpoint_down_fails_over_and_every_job_is_answered(tmp_path: Path) -> None:
    with FakeServer.thread(FakeScript(latency_s=0.02), answer_fn=answer_right) as up:
        calls = _run(tmp_path, _spec(DOWN, up.url))
        served = len(up.requests())
    assert len(calls) == 24 and all(c["status"] == "done" for c in calls)
    assert served == 24 and {c["endpoint"] for c in calls} == {up.url}
    assert {c["attempts"] for c in calls} == {1}  # failover happens inside one attempt: no runner retry


def test_endpoint_going_down_mid_run_every_job_is_answered(tmp_path: Path) -> None:
    script = FakeScript(latency_s=0.02)
    with FakeServer.thread(FakeScript(latency_s=0.02, down_after=10), answer_fn=answer_right) as dying, \
            FakeServer.thread(script, answer_fn=answer_right) as up:
        calls = _run(tmp_path, _spec(dying.url, up.url), cases=20)
        answered = {dying.url: sum(r.get("outcome") == "ok" for r in dying.requests()), up.url: len(up.requests())}
    assert len(calls) == 40 and all(c["status"] == "done" for c in calls)
    by_endpoint = {url: sum(c["endpoint"] == url for c in calls) for url in answered}
    assert by_endpoint[dying.url] <= 10 and by_endpoint[dying.url] + by_endpoint[up.url] == 40


def test_old_store_gains_the_endpoint_column_and_reads_without_it(tmp_path: Path) -> None:
    with FakeServer.thread(FakeScript(), answer_fn=answer_right) as srv:
        _run(tmp_path, _spec(srv.url), cases=2, variants=1)
    db = sqlite3.connect(tmp_path / "store.sqlite3")
    db.execute("ALTER TABLE calls DROP COLUMN endpoint")  # a store written before endpoints were recorded
    db.commit()
    db.close()
    with RunStore(tmp_path, readonly=True) as store:
        assert {r.endpoint for r in store.rows()} == {None}
    with RunStore(tmp_path) as store:  # a writable open adds the column
        assert "endpoint" in {row[1] for row in store.db.execute("PRAGMA table_info(calls)")}
        assert {r.endpoint for r in store.rows()} == {None}
