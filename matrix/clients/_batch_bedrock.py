"""Bedrock batch inference (model invocation jobs), through boto3: input and output in S3.

One batch is one JSONL object in S3 and one model invocation job. The steps
the runner drives (``BatchBackend``, see ``_batch``)::

    upload        s3.put_object(<s3_uri><name>.jsonl)                     -> "s3://bucket/prefix/<name>.jsonl"
    find_upload   s3.head_object of that key (exists -> its URI)
    submit        bedrock.create_model_invocation_job(jobName=<name>, clientRequestToken=<name>, ...) -> job ARN
    find_submitted  list_model_invocation_jobs(nameContains=<name>): the job of that name and input file
    status        get_model_invocation_job -> BatchStatus (output_file: "<output_s3_uri><job id>/")
    download      every "*.jsonl.out" object under that prefix (not manifest.json.out), concatenated
    cancel        stop_model_invocation_job

``clientRequestToken`` makes a create sent twice (a retry after a lost answer)
make one job; a process killed between the create and recording it finds the
job again by name and input file. Job names and S3 object names are the
runner's batch ids (``pg-<time>-<hex>``), which fit Bedrock's job name
pattern; any other name is mapped by :func:`job_name`.

Lines (``recordId`` is the job key, 64 hex characters)::

    {"recordId": KEY, "modelInput": {InvokeModel body}}
    {"recordId": KEY, "modelInput": {...}, "modelOutput": {InvokeModel response body}}
    {"recordId": KEY, "modelInput": {...}, "error": {"errorCode": 400, "errorMessage": "..."}}

Only Anthropic Claude models are supported (``bedrock/anthropic.*`` and the
inference profiles ``bedrock/us.anthropic.*``, ``eu.``, ``apac.``,
``global.``, ...; litellm's ``invoke/`` and ``converse/`` route prefixes are
dropped): the body is the Anthropic Messages body (``anthropic_version:
bedrock-2023-05-31``, ``system`` apart, generation parameters, native
``tools`` as ``{name, description, input_schema}``). Other families have
other bodies, which this module does not guess. ``seed`` is dropped, as the
online call does (Anthropic has no seed; litellm drops it with
``drop_params``). Constrained calls (the client decided ``response_format``)
are sent as Anthropic's JSON mode, as litellm sends them online: one tool
``json_tool_call`` whose input schema is the answer schema, forced with
``tool_choice``; its input comes back as the answer text. Grammars do not
exist on Bedrock.

Quotas (Amazon Bedrock service quotas, adjustable per account, so options):
at least ``min_requests`` (100) and at most ``max_requests`` (50,000)
records per job, input files up to about 1 GB. A batch below the minimum is
refused before upload with a ``bad_request`` error that says so; it is never
padded with made-up requests.

Errors: botocore's are converted once, here (:func:`convert_boto_error`):
throttling and quota codes -> rate_limit, access and credential codes ->
auth, validation -> bad_request, not found -> not_found, 5xx -> server.
botocore's own standard retries stay on, with the attempts and the connect
and read timeout of the shared ``RetryPolicy`` (``retry``; 3 attempts): the
batch runner does not retry these control-plane calls itself, and each is
idempotent (same object body, reads, a create with its token). Every message
is redacted by the client's ``Redactor`` and folded to one line. boto3 is synchronous: every call runs
in ``asyncio.to_thread``. Price: litellm's on-demand price of the model x 0.5
(Bedrock batch is half the on-demand price for the models that offer it),
or its batch price where litellm lists one.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO

from promptgrid.errors import RunError
from promptgrid.providers import (
    CallError,
    ErrorKind,
    RetryPolicy,
    call_error,
    credential_hint,
    kind_from_status,
    one_line,
)
from promptgrid.safeio import parse_json_line

from ._base import Completion, Messages, provider_count
from ._batch import BatchStatus, LineResult

__all__ = ["BEDROCK_BATCH_OPTIONS", "BedrockBatchBackend", "convert_boto_error", "job_name", "model_id"]

#: Keys of a model's ``batch:`` options (run config) that ``BedrockBatchBackend`` takes.
BEDROCK_BATCH_OPTIONS = ("role_arn", "s3_uri", "output_s3_uri", "region", "timeout_hours", "max_requests",
                         "min_requests", "max_bytes")

ANTHROPIC_VERSION = "bedrock-2023-05-31"
JSON_TOOL = "json_tool_call"
"""The tool a constrained (JSON-schema) call is answered through: litellm's name for it online."""

#: Bedrock job states -> ``BatchStatus.state``.
_STATES = {"Submitted": "running", "Validating": "running", "Scheduled": "running", "InProgress": "running",
           "Completed": "completed", "PartiallyCompleted": "completed", "Failed": "failed",
           "Stopping": "cancelled", "Stopped": "cancelled", "Expired": "expired"}

_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
           "refusal": "content_filter"}
#: Generation parameters -> Anthropic body fields. ``seed`` and ``timeout`` are dropped (see the docstring).
_PARAMS = {"temperature": "temperature", "max_tokens": "max_tokens", "max_completion_tokens": "max_tokens",
           "top_p": "top_p", "top_k": "top_k", "stop": "stop_sequences"}
_DROPPED = ("seed", "timeout")
_CHUNK = 1 << 20  # bytes read at a time from an output object

_JOB_NAME = re.compile(r"[a-zA-Z0-9]{1,63}(-*[a-zA-Z0-9+\-.]){0,63}")
_TOKEN = re.compile(r"[a-zA-Z0-9]([-a-zA-Z0-9]{0,254}[a-zA-Z0-9])?")
_ROLE_ARN = re.compile(r"arn:aws(-[^:]+)?:iam::([0-9]{12})?:role/.+")
_ANTHROPIC = re.compile(r"(?:[a-z-]+\.)?anthropic\.claude[^/]*")
_ROUTES = ("invoke/", "converse/")

_RATE_LIMIT = frozenset({"ThrottlingException", "Throttling", "TooManyRequestsException", "SlowDown",
                         "RequestLimitExceeded", "ServiceQuotaExceededException"})
_AUTH = frozenset({"AccessDenied", "AccessDeniedException", "UnrecognizedClientException", "InvalidAccessKeyId",
                   "SignatureDoesNotMatch", "ExpiredToken", "ExpiredTokenException", "InvalidClientTokenId",
                   "InvalidToken", "AllAccessDisabled", "403"})
_BAD_REQUEST = frozenset({"ValidationException", "InvalidRequest", "InvalidArgument", "ConflictException",
                          "InvalidBucketName", "MalformedXML", "400"})
_NOT_FOUND = frozenset({"ResourceNotFoundException", "NoSuchKey", "NoSuchBucket", "NotFound", "404"})
_SERVER = frozenset({"InternalServerException", "InternalError", "ServiceUnavailable",
                     "ServiceUnavailableException", "ModelNotReadyException"})


def model_id(model: str) -> str:
    """The Bedrock ``modelId`` of a promptgrid model string; ``RunError`` unless it is an Anthropic Claude model.

    ``bedrock/us.anthropic.claude-3-5-haiku-20241022-v1:0`` -> ``us.anthropic.claude-3-5-haiku-20241022-v1:0``.
    """
    rest = model.split("/", 1)[1] if model.startswith("bedrock/") else model
    for route in _ROUTES:
        rest = rest.removeprefix(route)
    if not _ANTHROPIC.fullmatch(rest):
        raise RunError(f"model {model}: Bedrock batch inference is supported here for Anthropic Claude models only "
                       "(bedrock/anthropic.claude-* and inference profiles such as bedrock/us.anthropic.claude-*); "
                       "other model families take other request bodies. Run this model online (without --batch).")
    return rest


def job_name(name: str) -> str:
    """A Bedrock job name (and S3 object name) for a batch id: the id itself when it fits Bedrock's pattern
    (``pg-20261123-abc`` does), else its allowed characters plus a hash of the whole id (so two ids never meet)."""
    if len(name) <= 63 and _JOB_NAME.fullmatch(name) and _TOKEN.fullmatch(name):
        return name
    cleaned = re.sub(r"[^a-zA-Z0-9-]+", "-", name).strip("-")[:50] or "pg"
    return f"{cleaned}-{hashlib.sha256(name.encode('utf-8')).hexdigest()[:12]}"


def _split_s3(uri: str, what: str) -> tuple[str, str]:
    """``s3://bucket/prefix/`` -> (bucket, "prefix/"); the prefix ends with ``/`` unless empty."""
    match = re.fullmatch(r"s3://([a-z0-9][-.a-z0-9]{1,61}[a-z0-9])(?:/(.*))?", uri)
    if not match:
        raise RunError(f"batch option {what}: {uri!r} is not an S3 location; write it as s3://BUCKET/PREFIX/")
    prefix = (match.group(2) or "").lstrip("/")
    return match.group(1), prefix if not prefix or prefix.endswith("/") else prefix + "/"


def _positive(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise RunError(f"batch option {what}: {value!r} must be a positive whole number")
    return value


def convert_boto_error(exc: BaseException, redact: Callable[[str], str], model: str) -> CallError:
    """One botocore/boto3 error as our ``CallError`` (see the module docstring); the message is redacted and
    one line (``providers.one_line``)."""
    from botocore.exceptions import (
        ClientError,
        ConnectTimeoutError,
        EndpointConnectionError,
        NoCredentialsError,
        NoRegionError,
        ParamValidationError,
        PartialCredentialsError,
        ReadTimeoutError,
    )

    if isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
        return call_error(ErrorKind.AUTH, f"{_clean(redact, str(exc))} -- {credential_hint(model)}")
    if isinstance(exc, NoRegionError):
        return call_error(ErrorKind.BAD_REQUEST, "no AWS region for Bedrock batch inference: set region in the "
                          "model's batch options, or export AWS_REGION=us-east-1 (for example)")
    if isinstance(exc, (ConnectTimeoutError, ReadTimeoutError)):
        return call_error(ErrorKind.TIMEOUT, _clean(redact, str(exc)))
    if isinstance(exc, EndpointConnectionError):
        return call_error(ErrorKind.CONNECTION, _clean(redact, str(exc)))
    if isinstance(exc, ParamValidationError):
        return call_error(ErrorKind.BAD_REQUEST, _clean(redact, str(exc)))
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {}) or {}
        code = str(error.get("Code") or "")
        status = (exc.response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
        status = status if isinstance(status, int) else None
        kind = _code_kind(code, status)
        message = _clean(redact, f"{code}: {error.get('Message') or exc}")
        if kind is ErrorKind.AUTH:
            message += f" -- {credential_hint(model)} The batch role (role_arn) needs access to the S3 location too."
        return call_error(kind, message, status=status)
    return call_error(ErrorKind.UNKNOWN, _clean(redact, f"{type(exc).__name__}: {exc}"))


def _clean(redact: Callable[[str], str], text: str) -> str:
    return one_line(redact(text))


def _code_kind(code: str, status: int | None) -> ErrorKind:
    for codes, kind in ((_RATE_LIMIT, ErrorKind.RATE_LIMIT), (_AUTH, ErrorKind.AUTH),
                        (_BAD_REQUEST, ErrorKind.BAD_REQUEST), (_NOT_FOUND, ErrorKind.NOT_FOUND),
                        (_SERVER, ErrorKind.SERVER)):
        if code in codes:
            return kind
    return kind_from_status(status)


class BedrockBatchBackend:
    """Bedrock batch inference for one Anthropic Claude model (see the module docstring).

    ``client`` is the model's ``LiteLLMClient`` (its name, redactor, price and
    constraint setting are reused). ``role_arn`` is the service role Bedrock
    reads and writes S3 with; ``s3_uri`` the folder input files go to;
    ``output_s3_uri`` (default: ``s3_uri``) where Bedrock writes results.
    ``region``: else ``AWS_REGION`` / ``AWS_DEFAULT_REGION`` / ``AWS_REGION_NAME``,
    else boto3's profile. ``s3`` and ``bedrock`` replace the boto3 clients (tests).
    Configuration errors are ``RunError`` at construction, before anything is sent.
    """

    kind = "bedrock"

    def __init__(self, client: Any, *, role_arn: str | None = None, s3_uri: str | None = None,
                 output_s3_uri: str | None = None, region: str | None = None, timeout_hours: int | None = None,
                 max_requests: int = 50_000, min_requests: int = 100, max_bytes: int = 1_000_000_000,
                 s3: Any = None, bedrock: Any = None, retry: RetryPolicy | None = None) -> None:
        self.client = client
        self.model_id = model_id(client.name)
        self.retry = retry or RetryPolicy(max_attempts=3)
        if getattr(client, "constraints", None) in ("vllm", "llama.cpp"):
            raise RunError(f"model {client.name}: constraints {client.constraints} sends a grammar, which Bedrock "
                           "does not take; remove it (Claude is constrained by a JSON schema) or set constraints: none")
        if not role_arn or not _ROLE_ARN.fullmatch(role_arn):
            raise RunError(f"model {client.name}: Bedrock batch inference needs batch option role_arn, the ARN of a "
                           "service role Bedrock can read and write the S3 location with "
                           f"(arn:aws:iam::ACCOUNT:role/NAME){f'; got {role_arn!r}' if role_arn else ''}")
        if not s3_uri:
            raise RunError(f"model {client.name}: Bedrock batch inference needs batch option s3_uri, the folder "
                           "input files are written to (s3://BUCKET/PREFIX/)")
        self.role_arn = role_arn
        self.bucket, self.prefix = _split_s3(s3_uri, "s3_uri")
        out_bucket, out_prefix = _split_s3(output_s3_uri or s3_uri, "output_s3_uri")
        self.output_uri = f"s3://{out_bucket}/{out_prefix}"
        if timeout_hours is not None and (_positive(timeout_hours, "timeout_hours") < 24 or timeout_hours > 168):
            raise RunError(f"batch option timeout_hours: {timeout_hours} is outside Bedrock's 24 to 168 hours")
        self.timeout_hours = timeout_hours
        self.max_requests = _positive(max_requests, "max_requests")
        self.min_requests = _positive(min_requests, "min_requests")
        self.max_bytes = _positive(max_bytes, "max_bytes")
        if self.min_requests > self.max_requests:
            raise RunError(f"batch options: min_requests {min_requests} is above max_requests {max_requests}")
        self.region = (region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
                       or os.environ.get("AWS_REGION_NAME"))
        self._s3 = s3
        self._bedrock = bedrock
        self._redact: Callable[[str], str] = getattr(client, "_redact", None) or (lambda text: text)

    # ------------------------------------------------------------------ lines

    def encode(self, key: str, messages: Messages, params: Mapping[str, Any],
               request: Mapping[str, Any] | None) -> bytes:
        body: dict[str, Any] = {"anthropic_version": ANTHROPIC_VERSION}
        for name, value in params.items():
            if value is None or name in _DROPPED:
                continue
            if name not in _PARAMS:
                raise call_error(ErrorKind.BAD_REQUEST, f"{self.client.name}: parameter {name!r} has no Anthropic "
                                 f"equivalent in a Bedrock batch; use {', '.join(sorted(_PARAMS))}")
            body[_PARAMS[name]] = [value] if name == "stop" and isinstance(value, str) else value
        system = [m["content"] for m in messages if m.get("role") == "system"]
        if system:
            body["system"] = "\n\n".join(system)
        turns = []
        for m in messages:
            role = m.get("role")
            if role == "system":
                continue
            if role not in ("user", "assistant"):
                raise call_error(ErrorKind.BAD_REQUEST, f"message role {role!r}: a Bedrock batch sends system, "
                                 "user and assistant messages only")
            turns.append({"role": role, "content": m["content"]})
        body["messages"] = turns
        if request is not None:
            body.update(self._request_fields(request))
        line = {"recordId": key, "modelInput": body}
        return json.dumps(line, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8") + b"\n"

    def _request_fields(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Native tools, or the JSON-mode tool of a constrained call, in Anthropic's shape."""
        if request.get("call_mode") == "native":
            tools = []
            for tool in request["tools"]:
                fn = tool.get("function", tool)
                entry = {"name": fn["name"], "input_schema": fn.get("parameters") or {"type": "object",
                                                                                      "properties": {}}}
                if fn.get("description"):
                    entry["description"] = fn["description"]
                tools.append(entry)
            return {"tools": tools, "tool_choice": _tool_choice(request.get("tool_choice", "auto"))}
        response_format = request.get("response_format")
        schema = (response_format or {}).get("json_schema", {}).get("schema") if isinstance(
            response_format, Mapping) else None
        if request.get("call_mode") != "constrained" or not isinstance(schema, Mapping):
            raise call_error(ErrorKind.BAD_REQUEST, f"{self.client.name}: a Bedrock batch sends native tools or a "
                             "JSON-schema constrained answer only (no grammars on Bedrock)")
        return {"tools": [{"name": JSON_TOOL, "input_schema": dict(schema)}],
                "tool_choice": {"type": "tool", "name": JSON_TOOL}}

    def decode(self, line: bytes, where: str) -> LineResult:
        """One output line; raises ``CallError`` (malformed) only when its ``recordId`` cannot be read."""
        try:
            obj = parse_json_line(line.decode("utf-8") if isinstance(line, bytes) else line)
        except (ValueError, UnicodeDecodeError) as exc:
            raise call_error(ErrorKind.MALFORMED, f"{where}: not a JSON line ({exc})") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("recordId"), str) or not obj["recordId"]:
            raise call_error(ErrorKind.MALFORMED, f"{where}: an output line needs a string recordId")
        key = obj["recordId"]
        error = obj.get("error")
        if isinstance(error, Mapping):
            return key, _line_error(error)
        output = obj.get("modelOutput")
        if not isinstance(output, Mapping):
            return key, call_error(ErrorKind.MALFORMED, f"{where}: no modelOutput and no error")
        model_input = obj.get("modelInput")
        json_mode = isinstance(model_input, Mapping) and model_input.get("tool_choice") == {
            "type": "tool", "name": JSON_TOOL}
        try:
            return key, _completion(output, json_mode, where)
        except CallError as exc:
            return key, exc

    # ------------------------------------------------------------------ AWS calls

    def _clients(self) -> tuple[Any, Any]:
        if self._s3 is None or self._bedrock is None:
            import boto3
            from botocore.config import Config

            # A session of our own, not boto3's process-wide default one (which caches credentials for everyone).
            session = boto3.session.Session()
            # The shared RetryPolicy's attempts and timeout, applied by botocore's standard retries (which
            # know each AWS error code; every call here is idempotent).
            config = Config(retries={"total_max_attempts": self.retry.max_attempts, "mode": "standard"},
                            connect_timeout=self.retry.timeout, read_timeout=self.retry.timeout)
            if self._s3 is None:
                self._s3 = session.client("s3", region_name=self.region, config=config)
            if self._bedrock is None:
                self._bedrock = session.client("bedrock", region_name=self.region, config=config)
        return self._s3, self._bedrock

    async def _call(self, service: str, operation: str, **kwargs: Any) -> Any:
        """``service.operation(**kwargs)`` in a worker thread; any botocore error as a ``CallError``."""
        def call() -> Any:
            s3, bedrock = self._clients()
            return getattr(s3 if service == "s3" else bedrock, operation)(**kwargs)

        try:
            return await asyncio.to_thread(call)
        except CallError:
            raise
        except Exception as exc:  # noqa: BLE001 - the boundary where AWS errors become ours
            raise convert_boto_error(exc, self._redact, self.client.name) from None

    def _key(self, name: str) -> str:
        return f"{self.prefix}{job_name(name)}.jsonl"

    async def upload(self, name: str, data: bytes) -> str:
        records = sum(1 for raw in data.splitlines() if raw.strip())
        if records < self.min_requests:
            raise call_error(ErrorKind.BAD_REQUEST, f"batch {name} has {records} requests; Bedrock batch inference "
                             f"takes at least {self.min_requests} per job (min_requests). Run these jobs online "
                             "(without --batch), or together with more jobs.")
        if records > self.max_requests:
            raise call_error(ErrorKind.BAD_REQUEST, f"batch {name} has {records} requests; at most "
                             f"{self.max_requests} per job (max_requests)")
        key = self._key(name)
        await self._call("s3", "put_object", Bucket=self.bucket, Key=key, Body=data,
                         ContentType="application/jsonl")
        return f"s3://{self.bucket}/{key}"

    async def find_upload(self, name: str) -> str | None:
        key = self._key(name)
        try:
            await self._call("s3", "head_object", Bucket=self.bucket, Key=key)
        except CallError as exc:
            if exc.kind is ErrorKind.NOT_FOUND:
                return None
            if exc.kind is ErrorKind.AUTH:
                # S3 answers 403, not 404, for a missing object when the caller may not list the bucket.
                raise call_error(ErrorKind.AUTH, f"{exc.message} (S3 refuses to say whether s3://{self.bucket}/{key} "
                                 "exists without s3:ListBucket on the bucket: grant it to these credentials)",
                                 status=exc.status) from None
            raise
        return f"s3://{self.bucket}/{key}"

    async def submit(self, file_id: str, name: str) -> str:
        job = job_name(name)
        kwargs: dict[str, Any] = {
            "jobName": job, "roleArn": self.role_arn, "clientRequestToken": job, "modelId": self.model_id,
            "inputDataConfig": {"s3InputDataConfig": {"s3Uri": file_id}},
            "outputDataConfig": {"s3OutputDataConfig": {"s3Uri": self.output_uri}}}
        if self.timeout_hours is not None:
            kwargs["timeoutDurationInHours"] = self.timeout_hours
        created = await self._call("bedrock", "create_model_invocation_job", **kwargs)
        return str(created["jobArn"])

    async def find_submitted(self, file_id: str, name: str) -> str | None:
        job = job_name(name)
        token = None
        for _ in range(50):
            kwargs: dict[str, Any] = {"nameContains": job, "maxResults": 100}
            if token:
                kwargs["nextToken"] = token
            listing = await self._call("bedrock", "list_model_invocation_jobs", **kwargs)
            for summary in listing.get("invocationJobSummaries") or ():
                uri = ((summary.get("inputDataConfig") or {}).get("s3InputDataConfig") or {}).get("s3Uri")
                if summary.get("jobName") == job and uri == file_id:
                    return str(summary["jobArn"])
            token = listing.get("nextToken")
            if not token:
                return None
        return None

    async def status(self, batch_id: str) -> BatchStatus:
        job = await self._call("bedrock", "get_model_invocation_job", jobIdentifier=batch_id)
        provider_state = str(job.get("status") or "unknown")
        state = _STATES.get(provider_state, "running")
        output = ((job.get("outputDataConfig") or {}).get("s3OutputDataConfig") or {}).get("s3Uri")
        output_file = None
        if state != "running" and isinstance(output, str):
            output_file = f"{output.rstrip('/')}/{batch_id.rsplit('/', 1)[-1]}/"
        message = job.get("message")
        return BatchStatus(state=state, provider_state=provider_state, output_file=output_file,
                           total=provider_count(job.get("totalRecordCount")),
                           completed=provider_count(job.get("successRecordCount")),
                           failed=provider_count(job.get("errorRecordCount")),
                           errors=self._redact(str(message))[:2000] if message else None)

    async def download(self, file_id: str, out: BinaryIO) -> int:
        """The output lines of a job: every ``*.jsonl.out`` object under the ``file_id`` prefix, joined, written
        to ``out`` a chunk at a time."""
        bucket, prefix = _s3_location(file_id)
        keys: list[str] = []
        token = None
        while True:
            kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
            if token:
                kwargs["ContinuationToken"] = token
            listing = await self._call("s3", "list_objects_v2", **kwargs)
            keys.extend(str(o["Key"]) for o in listing.get("Contents") or ()
                        if str(o.get("Key")).endswith(".jsonl.out"))
            token = listing.get("NextContinuationToken") if listing.get("IsTruncated") else None
            if not token:
                break
        out.seek(0)
        out.truncate()
        written = 0
        for key in sorted(keys):
            got = await self._call("s3", "get_object", Bucket=bucket, Key=key)
            body, last = got["Body"], b""
            while chunk := await asyncio.to_thread(body.read, _CHUNK):
                out.write(chunk)
                written += len(chunk)
                last = chunk
            if last and not last.endswith(b"\n"):  # objects are joined line by line
                out.write(b"\n")
                written += 1
        return written

    async def cancel(self, batch_id: str) -> None:
        await self._call("bedrock", "stop_model_invocation_job", jobIdentifier=batch_id)

    def price(self, input_tokens: int, output_tokens: int) -> float | None:
        lt = getattr(self.client, "_lt", None)
        entry = lt.model_cost.get(self.model_id) if lt is not None else None
        if isinstance(entry, Mapping) and entry.get("input_cost_per_token_batches") is not None:
            return (float(entry["input_cost_per_token_batches"]) * input_tokens
                    + float(entry.get("output_cost_per_token_batches") or 0.0) * output_tokens)
        online = self.client.price(input_tokens, output_tokens)
        return None if online is None else online * 0.5


def _s3_location(uri: str) -> tuple[str, str]:
    match = re.fullmatch(r"s3://([^/]+)/?(.*)", uri)
    if not match:
        raise call_error(ErrorKind.MALFORMED, f"{uri!r} is not an S3 location")
    return match.group(1), match.group(2)


def _tool_choice(choice: Any) -> dict[str, Any]:
    """An OpenAI ``tool_choice`` in Anthropic's shape."""
    if isinstance(choice, Mapping):
        return {"type": "tool", "name": (choice.get("function") or {}).get("name")}
    return {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}.get(
        str(choice), {"type": "auto"})



def _line_error(error: Mapping[str, Any]) -> CallError:
    """A line's ``{"errorCode", "errorMessage"}`` as a typed error (the code is an HTTP status or a name)."""
    code = error.get("errorCode")
    message = str(error.get("errorMessage") or code or "error")[:2000]
    status = code if isinstance(code, int) and not isinstance(code, bool) else (
        int(code) if isinstance(code, str) and code.isdigit() else None)
    kind = kind_from_status(status) if status is not None else _code_kind(str(code or ""), None)
    low = message.lower()
    if kind is ErrorKind.BAD_REQUEST and ("too long" in low or "context" in low and "length" in low):
        kind = ErrorKind.CONTEXT_LENGTH
    return call_error(kind, f"{code}: {message}" if code is not None else message, status=status)


def _completion(output: Mapping[str, Any], json_mode: bool, where: str) -> Completion:
    """An Anthropic Messages response body as a ``Completion`` (text blocks joined, tool_use blocks as
    OpenAI-shape tool calls; in JSON mode the ``json_tool_call`` input is the text)."""
    content = output.get("content")
    if not isinstance(content, list):
        raise call_error(ErrorKind.MALFORMED, f"{where}: modelOutput has no content list")
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in content:
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif block.get("type") == "tool_use":
            arguments = json.dumps(block.get("input") if block.get("input") is not None else {},
                                   ensure_ascii=False)
            if json_mode and block.get("name") == JSON_TOOL:
                texts.append(arguments)
                continue
            calls.append({"id": block.get("id"), "type": "function",
                          "function": {"name": block.get("name"), "arguments": arguments}})
    usage = output.get("usage")
    if not isinstance(usage, Mapping):
        usage = {}
    stop = output.get("stop_reason")
    finish = _FINISH.get(stop, stop) if isinstance(stop, str) else None
    if json_mode and finish == "tool_calls" and not calls:
        finish = "stop"
    return Completion(text="".join(texts), tool_calls=tuple(calls) or None, finish_reason=finish,
                      input_tokens=provider_count(usage.get("input_tokens")),
                      output_tokens=provider_count(usage.get("output_tokens")),
                      model=output.get("model") if isinstance(output.get("model"), str) else None)
