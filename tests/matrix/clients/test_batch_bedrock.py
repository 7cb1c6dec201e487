"""Bedrock batch inference backend against botocore's Stubber on both clients (s3, bedrock): no AWS, no network."""

from __future__ import annotations

import asyncio
import datetime
import gzip
import io
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import botocore
import pytest
from botocore.config import Config
from botocore.exceptions import NoCredentialsError, NoRegionError
from botocore.response import StreamingBody
from botocore.stub import Stubber

from promptgrid.errors import RunError
from promptgrid.matrix.clients import CallError, Completion, ErrorKind, Redactor
from promptgrid.matrix.clients._batch import OpenAIBatchBackend
from promptgrid.matrix.clients._batch_bedrock import (
    BedrockBatchBackend,
    convert_boto_error,
    job_name,
    model_id,
)
from promptgrid.matrix.clients._registry import make_batch_backend

MODEL = "bedrock/us.anthropic.claude-3-5-haiku-20241022-v1:0"
ROLE = "arn:aws:iam::123456789012:role/BedrockBatch"
ARN = "arn:aws:bedrock:us-east-1:123456789012:model-invocation-job/abcdefghijkl"
BATCH = "pg-20261123212559-0123456789"
KEY = "a" * 64
NOW = datetime.datetime(2026, 11, 23, tzinfo=datetime.timezone.utc)


@dataclass
class StubClient:
    """What the backend uses of a ``LiteLLMClient``."""

    name: str = MODEL
    constraints: str | None = None
    _redact: Redactor = field(default_factory=Redactor)

    def price(self, input_tokens: int, output_tokens: int) -> float | None:
        return 1e-6 * input_tokens + 2e-6 * output_tokens


def aws(service: str) -> Any:
    # Retries off in tests, so one stubbed error is one call.
    return boto3.client(service, region_name="us-east-1", aws_access_key_id="testing",
                        aws_secret_access_key="testing", config=Config(retries={"total_max_attempts": 1}))


def backend(client: Any = None, **options: Any) -> BedrockBatchBackend:
    options.setdefault("role_arn", ROLE)
    options.setdefault("s3_uri", "s3://pg-bucket/batches/in")
    return BedrockBatchBackend(client or StubClient(), s3=aws("s3"), bedrock=aws("bedrock"), **options)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def lines(n: int) -> bytes:
    return b"".join(b'{"recordId":"%d","modelInput":{}}\n' % i for i in range(n))


MSGS = [{"role": "system", "content": "You call functions."}, {"role": "user", "content": "Weather in Paris?"}]
TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Current weather.",
                                         "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                        "required": ["city"]}}}


# --------------------------------------------------------------------------- configuration


def test_model_ids_of_claude_models_and_inference_profiles() -> None:
    assert model_id(MODEL) == "us.anthropic.claude-3-5-haiku-20241022-v1:0"
    assert model_id("bedrock/anthropic.claude-3-haiku-20240307-v1:0") == "anthropic.claude-3-haiku-20240307-v1:0"
    assert model_id("bedrock/invoke/global.anthropic.claude-sonnet-4-5-20250929-v1:0") == \
        "global.anthropic.claude-sonnet-4-5-20250929-v1:0"


@pytest.mark.parametrize("name", ["bedrock/amazon.nova-pro-v1:0", "bedrock/meta.llama3-1-70b-instruct-v1:0",
                                  "bedrock/arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/x"])
def test_other_model_families_are_refused_naming_what_is_supported(name: str) -> None:
    with pytest.raises(RunError, match="Anthropic Claude models only.*online"):
        backend(StubClient(name=name))


@pytest.mark.parametrize(("options", "match"), [
    ({"role_arn": None}, "needs batch option role_arn"),
    ({"role_arn": "BedrockBatch"}, "role_arn.*got 'BedrockBatch'"),
    ({"s3_uri": None}, "needs batch option s3_uri"),
    ({"s3_uri": "pg-bucket/in"}, "not an S3 location"),
    ({"timeout_hours": 12}, "24 to 168"),
    ({"min_requests": 0}, "positive whole number"),
    ({"min_requests": 200, "max_requests": 100}, "above max_requests"),
])
def test_configuration_errors_are_run_errors_before_anything_is_sent(options: dict[str, Any], match: str) -> None:
    with pytest.raises(RunError, match=match):
        backend(**options)


def test_a_grammar_constraint_setting_is_refused() -> None:
    with pytest.raises(RunError, match="does not take"):
        backend(StubClient(constraints="vllm"))


def test_job_names_fit_bedrock_patterns() -> None:
    service = json.loads(gzip.decompress((Path(botocore.__file__).parent / "data/bedrock/2023-04-20/"
                                          "service-2.json.gz").read_bytes()))
    name_shape = service["shapes"]["ModelInvocationJobName"]
    token_shape = service["shapes"]["ModelInvocationIdempotencyToken"]
    for name in (BATCH, "my batch/ü", "x" * 200, "-lead"):
        got = job_name(name)
        assert re.fullmatch(name_shape["pattern"], got) and len(got) <= name_shape["max"]
        assert re.fullmatch(token_shape["pattern"], got) and len(got) <= token_shape["max"]
    assert job_name(BATCH) == BATCH
    assert job_name("a b") != job_name("a/b")  # different ids never share a job


# --------------------------------------------------------------------------- lines


def record(line: bytes) -> dict[str, Any]:
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    return json.loads(line)


def test_prompt_mode_line_is_the_anthropic_messages_body() -> None:
    line = backend().encode(KEY, MSGS, {"temperature": 0.0, "max_tokens": 512, "seed": 7, "top_p": 1, "stop": "END",
                                        "timeout": 30}, None)
    assert record(line) == {"recordId": KEY, "modelInput": {
        "anthropic_version": "bedrock-2023-05-31", "temperature": 0.0, "max_tokens": 512, "top_p": 1,
        "stop_sequences": ["END"], "system": "You call functions.",
        "messages": [{"role": "user", "content": "Weather in Paris?"}]}}


def test_native_tools_go_in_anthropic_shape() -> None:
    request = {"call_mode": "native", "tools": [TOOL], "tool_choice": "auto", "tool_names": {}}
    body = record(backend().encode(KEY, MSGS, {"max_tokens": 64}, request))["modelInput"]
    assert body["tools"] == [{"name": "get_weather", "description": "Current weather.",
                              "input_schema": TOOL["function"]["parameters"]}]
    assert body["tool_choice"] == {"type": "auto"}


def test_constrained_calls_use_the_json_tool() -> None:
    schema = {"type": "object", "properties": {"calls": {"type": "array"}}, "required": ["calls"]}
    request = {"call_mode": "constrained", "response_format": {"type": "json_schema", "json_schema": {
        "name": "function_calls", "schema": schema, "strict": True}}, "grammar": "root ::= x"}
    body = record(backend().encode(KEY, MSGS, {}, request))["modelInput"]
    assert body["tools"] == [{"name": "json_tool_call", "input_schema": schema}]
    assert body["tool_choice"] == {"type": "tool", "name": "json_tool_call"}


def test_what_bedrock_cannot_take_is_a_bad_request() -> None:
    with pytest.raises(CallError) as info:
        backend().encode(KEY, MSGS, {"frequency_penalty": 1}, None)
    assert info.value.kind is ErrorKind.BAD_REQUEST and "frequency_penalty" in info.value.message
    with pytest.raises(CallError, match="no grammars"):
        backend().encode(KEY, MSGS, {}, {"call_mode": "constrained", "response_format": None, "grammar": "g"})


def out_line(output: Mapping[str, Any] | None = None, error: Mapping[str, Any] | None = None,
             model_input: Mapping[str, Any] | None = None, key: str = KEY) -> bytes:
    obj: dict[str, Any] = {"recordId": key, "modelInput": model_input or {"messages": []}}
    if output is not None:
        obj["modelOutput"] = output
    if error is not None:
        obj["error"] = error
    return json.dumps(obj).encode()


def message(*content: dict[str, Any], stop: str = "end_turn") -> dict[str, Any]:
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-3-5-haiku-20241022",
            "content": list(content), "stop_reason": stop, "usage": {"input_tokens": 120, "output_tokens": 9}}


def test_decode_text_answer() -> None:
    key, c = backend().decode(out_line(message({"type": "text", "text": "[get_weather(city='Paris')]"})), "f:1")
    assert key == KEY and isinstance(c, Completion)
    assert (c.text, c.finish_reason, c.input_tokens, c.output_tokens, c.model, c.tool_calls) == (
        "[get_weather(city='Paris')]", "stop", 120, 9, "claude-3-5-haiku-20241022", None)


def test_decode_tool_use_as_openai_tool_calls() -> None:
    got = backend().decode(out_line(message(
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
        stop="tool_use")), "f:1")[1]
    assert isinstance(got, Completion)
    assert got.text == "Checking." and got.finish_reason == "tool_calls"
    assert got.tool_calls == ({"id": "toolu_1", "type": "function",
                               "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},)


def test_decode_json_mode_answer_is_text() -> None:
    forced = {"messages": [], "tool_choice": {"type": "tool", "name": "json_tool_call"}}
    got = backend().decode(out_line(message({"type": "tool_use", "id": "t", "name": "json_tool_call",
                                             "input": {"calls": []}}, stop="tool_use"), model_input=forced), "f:1")[1]
    assert isinstance(got, Completion)
    assert (got.text, got.tool_calls, got.finish_reason) == ('{"calls": []}', None, "stop")


@pytest.mark.parametrize(("error", "kind"), [
    ({"errorCode": 400, "errorMessage": "messages: roles must alternate"}, ErrorKind.BAD_REQUEST),
    ({"errorCode": 400, "errorMessage": "prompt is too long: 250000 tokens"}, ErrorKind.CONTEXT_LENGTH),
    ({"errorCode": 429, "errorMessage": "Too many tokens"}, ErrorKind.RATE_LIMIT),
    ({"errorCode": "500", "errorMessage": "internal"}, ErrorKind.SERVER),
    ({"errorCode": "ThrottlingException", "errorMessage": "slow down"}, ErrorKind.RATE_LIMIT),
    ({"errorCode": "ModelErrorException"}, ErrorKind.UNKNOWN),
])
def test_decode_error_lines_as_typed_errors(error: dict[str, Any], kind: ErrorKind) -> None:
    key, got = backend().decode(out_line(error=error), "f:1")
    assert key == KEY and isinstance(got, CallError)
    assert got.kind is kind and str(error["errorCode"]) in got.message


def test_decode_malformed_lines() -> None:
    b = backend()
    for bad in (b"not json", b'{"modelOutput": {}}', b'{"recordId": 3}', b"[1]"):
        with pytest.raises(CallError) as info:
            b.decode(bad, "out:7")
        assert info.value.kind is ErrorKind.MALFORMED and "out:7" in info.value.message
    for number, line in ((8, out_line()), (9, out_line({"content": "text"}))):
        got = b.decode(line, f"out:{number}")[1]
        assert isinstance(got, CallError) and got.kind is ErrorKind.MALFORMED


# --------------------------------------------------------------------------- S3 and jobs


def test_upload_puts_the_file_under_the_prefix() -> None:
    b = backend()
    data = lines(100)
    with Stubber(b._s3) as s3:
        s3.add_response("put_object", {"ETag": '"x"'}, expected_params={
            "Bucket": "pg-bucket", "Key": f"batches/in/{BATCH}.jsonl", "Body": data,
            "ContentType": "application/jsonl"})
        assert run(b.upload(BATCH, data)) == f"s3://pg-bucket/batches/in/{BATCH}.jsonl"
        s3.assert_no_pending_responses()


def test_upload_below_the_minimum_is_refused_before_anything_is_sent() -> None:
    b = backend()
    with Stubber(b._s3):  # no response queued: any call would fail the test
        with pytest.raises(CallError) as info:
            run(b.upload(BATCH, lines(99)))
    assert info.value.kind is ErrorKind.BAD_REQUEST
    assert "99 requests" in info.value.message and "at least 100" in info.value.message
    small = backend(min_requests=1)
    with Stubber(small._s3) as s3:
        s3.add_response("put_object", {}, expected_params=None)
        run(small.upload(BATCH, lines(1)))


def test_find_upload() -> None:
    b = backend()
    where = {"Bucket": "pg-bucket", "Key": f"batches/in/{BATCH}.jsonl"}
    with Stubber(b._s3) as s3:
        s3.add_response("head_object", {"ContentLength": 10}, expected_params=where)
        s3.add_client_error("head_object", service_error_code="404", http_status_code=404, expected_params=where)
        s3.add_client_error("head_object", service_error_code="403", http_status_code=403, expected_params=where)
        assert run(b.find_upload(BATCH)) == f"s3://pg-bucket/batches/in/{BATCH}.jsonl"
        assert run(b.find_upload(BATCH)) is None
        with pytest.raises(CallError) as info:
            run(b.find_upload(BATCH))
        assert info.value.kind is ErrorKind.AUTH and "s3:ListBucket" in info.value.message


def test_submit_creates_an_idempotent_job() -> None:
    b = backend(output_s3_uri="s3://pg-out/results/", timeout_hours=48)
    uri = f"s3://pg-bucket/batches/in/{BATCH}.jsonl"
    with Stubber(b._bedrock) as bedrock:
        bedrock.add_response("create_model_invocation_job", {"jobArn": ARN}, expected_params={
            "jobName": BATCH, "roleArn": ROLE, "clientRequestToken": BATCH,
            "modelId": "us.anthropic.claude-3-5-haiku-20241022-v1:0",
            "inputDataConfig": {"s3InputDataConfig": {"s3Uri": uri}},
            "outputDataConfig": {"s3OutputDataConfig": {"s3Uri": "s3://pg-out/results/"}},
            "timeoutDurationInHours": 48})
        assert run(b.submit(uri, BATCH)) == ARN
        bedrock.assert_no_pending_responses()


def summary(name: str, uri: str, arn: str = ARN) -> dict[str, Any]:
    return {"jobArn": arn, "jobName": name, "modelId": "m", "roleArn": ROLE, "submitTime": NOW,
            "status": "InProgress", "inputDataConfig": {"s3InputDataConfig": {"s3Uri": uri}},
            "outputDataConfig": {"s3OutputDataConfig": {"s3Uri": "s3://pg-bucket/batches/in/"}}}


def test_find_submitted_adopts_the_job_of_this_name_and_file_across_pages() -> None:
    b = backend()
    uri = f"s3://pg-bucket/batches/in/{BATCH}.jsonl"
    other = "arn:aws:bedrock:us-east-1:123456789012:model-invocation-job/zzzzzzzzzzzz"
    with Stubber(b._bedrock) as bedrock:
        bedrock.add_response("list_model_invocation_jobs", {
            "invocationJobSummaries": [summary(BATCH + "-x", uri, other), summary(BATCH, "s3://pg-bucket/o.jsonl",
                                                                                   other)],
            "nextToken": "p2"}, expected_params={"nameContains": BATCH, "maxResults": 100})
        bedrock.add_response("list_model_invocation_jobs", {"invocationJobSummaries": [summary(BATCH, uri)]},
                             expected_params={"nameContains": BATCH, "maxResults": 100, "nextToken": "p2"})
        bedrock.add_response("list_model_invocation_jobs", {"invocationJobSummaries": []},
                             expected_params={"nameContains": BATCH, "maxResults": 100})
        assert run(b.find_submitted(uri, BATCH)) == ARN
        assert run(b.find_submitted(uri, BATCH)) is None
        bedrock.assert_no_pending_responses()


def job(status: str, **extra: Any) -> dict[str, Any]:
    return {**summary(BATCH, "s3://pg-bucket/batches/in/x.jsonl"), "status": status, **extra}


@pytest.mark.parametrize(("provider", "state"), [
    ("Submitted", "running"), ("Validating", "running"), ("Scheduled", "running"), ("InProgress", "running"),
    ("Completed", "completed"), ("PartiallyCompleted", "completed"), ("Failed", "failed"),
    ("Stopping", "cancelled"), ("Stopped", "cancelled"), ("Expired", "expired")])
def test_status_maps_every_job_state(provider: str, state: str) -> None:
    b = backend()
    with Stubber(b._bedrock) as bedrock:
        bedrock.add_response("get_model_invocation_job", job(provider), expected_params={"jobIdentifier": ARN})
        got = run(b.status(ARN))
    assert (got.state, got.provider_state) == (state, provider)
    assert got.output_file == (None if state == "running" else "s3://pg-bucket/batches/in/abcdefghijkl/")
    assert got.error_file is None


def test_status_counts_and_message() -> None:
    b = backend()
    with Stubber(b._bedrock) as bedrock:
        bedrock.add_response("get_model_invocation_job", job(
            "Failed", message="The role cannot read s3://pg-bucket", totalRecordCount=120, successRecordCount=0,
            errorRecordCount=0))
        got = run(b.status(ARN))
    assert (got.state, got.total, got.completed, got.failed) == ("failed", 120, 0, 0)
    assert got.errors == "The role cannot read s3://pg-bucket"


def body(data: bytes) -> StreamingBody:
    return StreamingBody(io.BytesIO(data), len(data))


def test_download_reads_every_output_file_but_the_manifest() -> None:
    b = backend()
    prefix = "batches/in/abcdefghijkl/"
    first = out_line(message({"type": "text", "text": "hi"}), key="k1") + b"\n"
    second = out_line(error={"errorCode": 400, "errorMessage": "bad"}, key="k2")  # no final newline
    with Stubber(b._s3) as s3:
        s3.add_response("list_objects_v2", {
            "IsTruncated": True, "NextContinuationToken": "c2",
            "Contents": [{"Key": prefix + "manifest.json.out"}, {"Key": prefix + f"{BATCH}.jsonl.out"}]},
            expected_params={"Bucket": "pg-bucket", "Prefix": prefix})
        s3.add_response("list_objects_v2", {"IsTruncated": False, "Contents": [{"Key": prefix + "b.jsonl.out"}]},
                        expected_params={"Bucket": "pg-bucket", "Prefix": prefix, "ContinuationToken": "c2"})
        s3.add_response("get_object", {"Body": body(second)}, expected_params={
            "Bucket": "pg-bucket", "Key": prefix + "b.jsonl.out"})
        s3.add_response("get_object", {"Body": body(first)}, expected_params={
            "Bucket": "pg-bucket", "Key": prefix + f"{BATCH}.jsonl.out"})
        out = io.BytesIO(b"stale bytes of an earlier try")
        assert run(b.download("s3://pg-bucket/" + prefix, out)) == len(out.getvalue())
        s3.assert_no_pending_responses()
    data = out.getvalue()
    assert data.count(b"\n") == 2 and data.endswith(b"\n")  # joined line by line, the stale bytes gone
    results = dict(b.decode(raw, "out") for raw in data.splitlines())
    assert set(results) == {"k1", "k2"}
    k1, k2 = results["k1"], results["k2"]
    assert isinstance(k1, Completion) and k1.text == "hi"
    assert isinstance(k2, CallError) and k2.kind is ErrorKind.BAD_REQUEST


def test_cancel_stops_the_job() -> None:
    b = backend()
    with Stubber(b._bedrock) as bedrock:
        bedrock.add_response("stop_model_invocation_job", {}, expected_params={"jobIdentifier": ARN})
        run(b.cancel(ARN))
        bedrock.assert_no_pending_responses()


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(("code", "status", "kind"), [
    ("ThrottlingException", 429, ErrorKind.RATE_LIMIT),
    ("ServiceQuotaExceededException", 400, ErrorKind.RATE_LIMIT),
    ("AccessDeniedException", 403, ErrorKind.AUTH),
    ("UnrecognizedClientException", 403, ErrorKind.AUTH),
    ("ValidationException", 400, ErrorKind.BAD_REQUEST),
    ("ConflictException", 409, ErrorKind.BAD_REQUEST),
    ("ResourceNotFoundException", 404, ErrorKind.NOT_FOUND),
    ("InternalServerException", 500, ErrorKind.SERVER),
    ("SomethingNew", 503, ErrorKind.SERVER),
])
def test_client_errors_are_typed(code: str, status: int, kind: ErrorKind) -> None:
    b = backend()
    with Stubber(b._bedrock) as bedrock:
        bedrock.add_client_error("get_model_invocation_job", service_error_code=code, service_message="no",
                                 http_status_code=status)
        with pytest.raises(CallError) as info:
            run(b.status(ARN))
    assert info.value.kind is kind and info.value.status == status and code in info.value.message
    assert info.value.retryable is kind.retryable
    if kind is ErrorKind.AUTH:
        assert "AWS_ACCESS_KEY_ID" in info.value.message and "role_arn" in info.value.message


def test_credentials_region_and_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    redactor = Redactor()
    redactor.add(secret)
    assert convert_boto_error(NoCredentialsError(), redactor, MODEL).kind is ErrorKind.AUTH
    region = convert_boto_error(NoRegionError(), redactor, MODEL)
    assert region.kind is ErrorKind.BAD_REQUEST and "AWS_REGION" in region.message
    leaked = convert_boto_error(RuntimeError(f"signature with {secret}"), redactor, MODEL)
    assert secret not in leaked.message and leaked.kind is ErrorKind.UNKNOWN


def test_boto3_clients_are_built_from_the_region(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    b = BedrockBatchBackend(StubClient(), role_arn=ROLE, s3_uri="s3://pg-bucket/")
    s3, bedrock = b._clients()
    assert bedrock.meta.region_name == "eu-west-1" and s3.meta.region_name == "eu-west-1"
    assert BedrockBatchBackend(StubClient(), role_arn=ROLE, s3_uri="s3://pg-bucket/", region="us-west-2") \
        ._clients()[1].meta.region_name == "us-west-2"


# --------------------------------------------------------------------------- price and the factory


def test_price_is_half_the_on_demand_price() -> None:
    from promptgrid.matrix.clients import make_client

    client = make_client(MODEL)
    b = backend(client)
    online = client.price(1000, 100)
    assert online is not None and b.price(1000, 100) == pytest.approx(online * 0.5)
    assert backend(StubClient()).price(10, 10) == pytest.approx(0.5 * (1e-5 + 2e-5))

    class Unknown(StubClient):
        def price(self, input_tokens: int, output_tokens: int) -> float | None:
            return None

    assert backend(Unknown()).price(10, 10) is None


def test_make_batch_backend_picks_by_provider() -> None:
    from promptgrid.matrix.clients import make_client

    bedrock = make_batch_backend(make_client(MODEL), {"role_arn": ROLE, "s3_uri": "s3://pg-bucket/in/",
                                                      "min_requests": 10})
    assert isinstance(bedrock, BedrockBatchBackend) and bedrock.min_requests == 10
    assert isinstance(make_batch_backend(make_client("openai/gpt-4o-mini")), OpenAIBatchBackend)
    assert make_batch_backend(make_client("anthropic/claude-3-5-haiku-20241022")) is None
    with pytest.raises(RunError, match="role_arn"):
        make_batch_backend(make_client(MODEL))


# --------------------------------------------------------------------------- through the batch runner


class Crash(BaseException):
    """The process dying right after AWS did a step (not an ``Exception``: nothing may catch it)."""


class MemoryAWS:
    """S3 and Bedrock in memory, speaking boto3's method names: a job answers every line after ``polls``
    polls; ``crash_at`` (an operation name) raises ``Crash`` once, after the operation took effect."""

    def __init__(self, polls: int = 1, crash_at: str | None = None) -> None:
        self.objects: dict[tuple[str, str], bytes] = {}
        self.jobs: dict[str, dict[str, Any]] = {}
        self.polls = polls
        self.crash_at = crash_at
        self.log: list[str] = []

    def _done(self, operation: str) -> None:
        self.log.append(operation)
        if self.crash_at == operation:
            self.crash_at = None
            raise Crash(operation)

    def put_object(self, *, Bucket: str, Key: str, Body: bytes, ContentType: str) -> dict[str, Any]:
        self.objects[(Bucket, Key)] = Body
        self._done("put_object")
        return {}

    def head_object(self, *, Bucket: str, Key: str) -> dict[str, Any]:
        if (Bucket, Key) not in self.objects:
            raise botocore.exceptions.ClientError({"Error": {"Code": "404", "Message": "Not Found"},
                                                   "ResponseMetadata": {"HTTPStatusCode": 404}}, "HeadObject")
        return {"ContentLength": len(self.objects[(Bucket, Key)])}

    def create_model_invocation_job(self, **kw: Any) -> dict[str, Any]:
        same = [arn for arn, j in self.jobs.items() if j["clientRequestToken"] == kw["clientRequestToken"]]
        arn = same[0] if same else f"arn:aws:bedrock:us-east-1:123456789012:model-invocation-job/{len(self.jobs):012d}"
        if not same:
            self.jobs[arn] = {**kw, "jobArn": arn, "status": "Submitted", "polled": 0}
        self._done("create_model_invocation_job")
        return {"jobArn": arn}

    def list_model_invocation_jobs(self, *, nameContains: str, maxResults: int) -> dict[str, Any]:
        return {"invocationJobSummaries": [j for j in self.jobs.values() if nameContains in j["jobName"]]}

    def get_model_invocation_job(self, *, jobIdentifier: str) -> dict[str, Any]:
        job = self.jobs[jobIdentifier]
        job["polled"] += 1
        if job["polled"] > self.polls and job["status"] != "Completed":
            bucket, key = job["inputDataConfig"]["s3InputDataConfig"]["s3Uri"][5:].split("/", 1)
            out = []
            for raw in self.objects[(bucket, key)].splitlines():
                rec = json.loads(raw)
                text = answer_right(rec["modelInput"])
                out.append({**rec, "modelOutput": message({"type": "text", "text": text})})
            out_bucket, out_prefix = job["outputDataConfig"]["s3OutputDataConfig"]["s3Uri"][5:].split("/", 1)
            folder = f"{out_prefix}{jobIdentifier.rsplit('/', 1)[-1]}/"
            self.objects[(out_bucket, folder + key.rsplit("/", 1)[-1] + ".out")] = "\n".join(
                json.dumps(o) for o in out).encode()
            self.objects[(out_bucket, folder + "manifest.json.out")] = b'{"totalRecordCount": 0}'
            job["status"] = "Completed"
        self._done("get_model_invocation_job")
        return dict(job)

    def list_objects_v2(self, *, Bucket: str, Prefix: str) -> dict[str, Any]:
        return {"IsTruncated": False, "Contents": [{"Key": k} for b, k in self.objects if b == Bucket
                                                   and k.startswith(Prefix)]}

    def get_object(self, *, Bucket: str, Key: str) -> dict[str, Any]:
        return {"Body": io.BytesIO(self.objects[(Bucket, Key)])}

    def uploaded_keys(self) -> list[str]:
        return [json.loads(raw)["recordId"] for (_, key), data in self.objects.items() if key.endswith(".jsonl")
                for raw in data.splitlines()]


def _bedrock_run(run_dir: Path, memory: MemoryAWS) -> Any:
    from promptgrid.matrix.clients import make_client
    from promptgrid.matrix.running.session import BatchMode, execute
    from support.builders import bfcl_variants, numbered_cases
    from support.running import config, prepared, stand_in_score

    prep = prepared(config(run_dir, model=MODEL), bfcl_variants(3), numbered_cases(12))
    backend = BedrockBatchBackend(make_client(MODEL), role_arn=ROLE, s3_uri="s3://pg-bucket/in/",
                                  output_s3_uri="s3://pg-bucket/out/", min_requests=1, max_requests=10,
                                  s3=memory, bedrock=memory)
    return asyncio.run(execute(prep, scorer=stand_in_score, batch=BatchMode(wait=True, poll_s=0.001),
                               backends={MODEL: backend}))


def answer_right(body: Mapping[str, Any]) -> str:
    from support.running import answer_right as right

    return right(dict(body))


def _stored(run_dir: Path) -> list[tuple[Any, ...]]:
    from promptgrid.matrix.running.store import RunStore

    with RunStore(run_dir, readonly=True) as store:
        return sorted((r.status, r.valid) for r in store.rows(include_pending=True))


def test_a_bedrock_batch_run_answers_every_job(tmp_path: Path) -> None:
    memory = MemoryAWS()
    summary = _bedrock_run(tmp_path, memory)
    assert summary.batches == 4 and summary.batch_jobs == 36 and summary.sent == 36 and summary.errors == 0
    assert _stored(tmp_path) == [("done", True)] * 36
    assert len(memory.jobs) == 4 and all(j["modelId"] == model_id(MODEL) for j in memory.jobs.values())


@pytest.mark.parametrize("step", ["put_object", "create_model_invocation_job", "get_model_invocation_job"])
def test_a_crash_after_an_aws_step_resumes_with_nothing_uploaded_or_submitted_twice(tmp_path: Path,
                                                                                     step: str) -> None:
    memory = MemoryAWS(crash_at=step)
    with pytest.raises(Crash):
        _bedrock_run(tmp_path, memory)
    _bedrock_run(tmp_path, memory)
    keys = memory.uploaded_keys()
    assert len(keys) == 36 and len(set(keys)) == 36  # each job in exactly one input file
    # found again (head_object, list_model_invocation_jobs), never made twice
    assert memory.log.count("put_object") == 4 and memory.log.count("create_model_invocation_job") == 4
    assert len(memory.jobs) == 4
    assert _stored(tmp_path) == [("done", True)] * 36
