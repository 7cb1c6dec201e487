"""Pick the client for a model string. Optional dependencies are imported only here, on use."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from promptgrid.providers import RetryPolicy

from ._base import ModelClient
from ._batch import BatchBackend, OpenAIBatchBackend, batch_kind
from ._redact import Redactor

__all__ = ["make_batch_backend", "make_client", "provider_of"]


def provider_of(name: str) -> str:
    """``local``, ``fake``, ``replay`` or ``litellm``."""
    if name.startswith("local/"):
        return "local"
    if name.startswith("fake/"):
        return "fake"
    if name.startswith("replay/"):
        return "replay"
    return "litellm"


def make_client(name: str, *, api_base: str | Sequence[str] | None = None, api_key_env: str | None = None,
                redactor: Redactor | None = None, constraints: str | None = None) -> ModelClient:
    """The client for ``name``; raises ``MissingDependencyError`` when its extra is not installed.

    ``constraints``: how a litellm model is sent constrained calls (``ModelSpec.constraints``).
    ``api_base``: one URL, or several (replicas of the model, spread by litellm's Router; ``ModelSpec.api_bases``).
    """
    provider = provider_of(name)
    if provider == "local":
        from ._local import LocalClient

        return LocalClient(name)
    if provider == "fake":
        from ._fake import make_fake_client

        return make_fake_client(name)
    if provider == "replay":
        from ._replay import ReplayClient

        return ReplayClient(name)
    from ._litellm import LiteLLMClient

    return LiteLLMClient(name, api_base=api_base, api_key_env=api_key_env, redactor=redactor,
                         constraints=constraints)


def make_batch_backend(client: Any, options: Mapping[str, Any] | None = None, *,
                       retry: RetryPolicy | None = None) -> BatchBackend | None:
    """The batch backend of ``client``'s model (a ``LiteLLMClient``), or ``None`` when it has no batch API we drive.

    ``options`` are the model's ``batch:`` settings in the run config, passed as keywords (``max_requests``,
    ``max_bytes``; for Bedrock ``_batch_bedrock.BEDROCK_BATCH_OPTIONS``). Bedrock's backend is imported on use.
    ``retry``: the run's retry policy (``RunConfig.retry_policy``), so batch calls retry as the run's calls do.
    """
    kind = batch_kind(client.name)
    if kind == "openai":
        extra = sorted(set(options or {}) - {"max_requests", "max_bytes"})
        if extra:
            from promptgrid.errors import RunError

            raise RunError(f"model {client.name}: batch option(s) {', '.join(extra)} apply to Bedrock only; an "
                           "OpenAI-compatible batch API takes max_requests and max_bytes.")
        return OpenAIBatchBackend(client, retry=retry, **dict(options or {}))
    if kind == "bedrock":
        from ._batch_bedrock import BedrockBatchBackend

        return BedrockBatchBackend(client, retry=retry, **dict(options or {}))
    return None
