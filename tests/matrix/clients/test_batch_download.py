"""A batch's output file is downloaded as a stream to a file (issue 20: a 1 GB output cost 3.4 GB of memory):
never whole in memory, a retried download starts the file again, and errors are the policy's one-line kinds."""

from __future__ import annotations

import asyncio
import io
import tempfile
import tracemalloc

import openai
import pytest

from promptgrid.matrix.clients._batch import OpenAIBatchBackend
from promptgrid.matrix.clients._registry import make_client
from promptgrid.providers import CallError, RetryPolicy
from support.fake_server import FakeServer


def _upload(url: str, data: bytes) -> str:
    async def go() -> str:
        client = openai.AsyncOpenAI(base_url=url, api_key="k", max_retries=0)
        try:
            created = await client.files.create(file=("out.jsonl", data, "application/jsonl"), purpose="batch")
            return created.id
        finally:
            await client.close()

    return asyncio.run(go())


def test_a_large_file_streams_to_disk_in_bounded_memory() -> None:
    line = b'{"custom_id": "k", "response": {"status_code": 200, "body": {"x": "' + b"a" * 1000 + b'"}}}\n'
    data = line * 24_000  # about 24 MB
    with FakeServer.subprocess() as srv:  # its own process: only the download's memory is traced here
        file_id = _upload(srv.url, data)
        backend = OpenAIBatchBackend(make_client("openai/m", api_base=srv.url))
        with tempfile.TemporaryFile() as out:
            out.write(b"stale")
            tracemalloc.start()
            try:
                written = asyncio.run(backend.download(file_id, out))
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            out.seek(0)
            assert written == len(data) and out.read() == data
    assert peak < len(data) / 4, f"peak {peak / 1e6:.1f} MB for a {len(data) / 1e6:.1f} MB file"


def test_a_missing_file_is_one_typed_error_not_retried_forever() -> None:
    with FakeServer.thread() as srv:
        backend = OpenAIBatchBackend(make_client("openai/m", api_base=srv.url), retry=RetryPolicy(max_attempts=2))
        with pytest.raises(CallError) as caught:
            asyncio.run(backend.download("file-none", io.BytesIO()))
    assert caught.value.kind.value == "not_found"
    assert "\n" not in caught.value.message
