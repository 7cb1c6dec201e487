"""Shared test set-up: no network, no keys, litellm offline, no user cache; hypothesis profiles
(support/profiles.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from support import profiles

profiles.load(os.environ)

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_LOG", "ERROR")
# Tests never reach a real provider: any key a test needs is a fake it plants itself.
for _key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
             "MISTRAL_API_KEY", "GEMINI_API_KEY"):
    os.environ.pop(_key, None)


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The user's cache (the default translation store lives there) is never read or written by a test."""
    cache = tmp_path_factory.mktemp("xdg-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(cache))
        yield cache
