"""Pick the client for a model string. Optional dependencies are imported only here, on use."""

from __future__ import annotations

from ._base import ModelClient
from ._redact import Redactor

__all__ = ["make_client", "provider_of"]


def provider_of(name: str) -> str:
    """``local``, ``fake`` or ``litellm``."""
    if name.startswith("local/"):
        return "local"
    if name.startswith("fake/"):
        return "fake"
    return "litellm"


def make_client(name: str, *, api_base: str | None = None, api_key_env: str | None = None,
                redactor: Redactor | None = None, constraints: str | None = None) -> ModelClient:
    """The client for ``name``; raises ``MissingDependencyError`` when its extra is not installed.

    ``constraints``: how a litellm model is sent constrained calls (``ModelSpec.constraints``).
    """
    provider = provider_of(name)
    if provider == "local":
        from ._local import LocalClient

        return LocalClient(name)
    if provider == "fake":
        from ._fake import FakeClient

        return FakeClient(name)
    from ._litellm import LiteLLMClient

    return LiteLLMClient(name, api_base=api_base, api_key_env=api_key_env, redactor=redactor,
                         constraints=constraints)
