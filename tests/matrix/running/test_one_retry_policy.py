"""One retry policy per run: the runner's calls and the models' batch APIs retry alike (issue 20, item 2)."""

from __future__ import annotations

import json
from pathlib import Path

from promptgrid.matrix.clients import make_batch_backend
from promptgrid.matrix.clients._registry import make_client
from promptgrid.matrix.running.config import ModelSpec, RunConfig, model_params, retry_policy
from promptgrid.matrix.running.session import _backends_of_run, batch_backends


def _config(tmp_path: Path, **fields: object) -> RunConfig:
    spec = ModelSpec("openai/gpt-4o-mini", model_params({}, 1))
    return RunConfig(grid="bfcl_v4", dataset="mini", models=(spec,), run_dir=tmp_path, **fields)  # type: ignore[arg-type]


def test_the_run_policy_reaches_every_batch_backend(tmp_path: Path) -> None:
    config = _config(tmp_path, max_retries=2, backoff_base_s=0.5, backoff_max_s=7.0, retry_after_cap=30.0)
    policy = config.retry_policy()
    assert (policy.max_attempts, policy.base, policy.cap, policy.retry_after_cap) == (3, 0.5, 7.0, 30.0)
    clients = {"openai/gpt-4o-mini": make_client("openai/gpt-4o-mini")}
    backend = batch_backends(config.models, clients, retry=policy)["openai/gpt-4o-mini"]
    assert backend.retry is policy
    bedrock = make_batch_backend(make_client("bedrock/anthropic.claude-3-haiku-20240307-v1:0"),
                                 {"role_arn": "arn:aws:iam::123456789012:role/r", "s3_uri": "s3://pg-bucket/in/"},
                                 retry=policy)
    assert bedrock is not None and bedrock.retry is policy


def test_status_rebuilds_the_policy_recorded_in_run_json(tmp_path: Path) -> None:
    config = _config(tmp_path, max_retries=1, backoff_max_s=3.0)
    (tmp_path / "run.json").write_text(json.dumps({"config": config.to_dict()}), encoding="utf-8")
    backend = _backends_of_run(tmp_path, ["openai/gpt-4o-mini"], None)["openai/gpt-4o-mini"]
    assert (backend.retry.max_attempts, backend.retry.cap) == (2, 3.0)
    assert retry_policy().max_attempts == RunConfig(grid="g", dataset="d", models=(), run_dir=tmp_path).retry_policy(
    ).max_attempts
