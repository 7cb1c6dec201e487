"""Fixtures shared by the translate tests (no network, no keys, no real sleeping).

Helpers are fixtures rather than importable functions: tests run with
``--import-mode=importlib``, where test modules cannot import each other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from promptgrid.translate import TranslationCheck, TranslationStore


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Never read or write the developer's real translation store."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[TranslationStore]:
    with TranslationStore(tmp_path / "translations.sqlite3") as s:
        yield s


def _accept_all(*_args: object, **_kwargs: object) -> TranslationCheck:
    return TranslationCheck(True, [], {})


@pytest.fixture
def accept_all() -> Callable[..., TranslationCheck]:
    """A checker that passes everything (for tests about sending and caching)."""
    return _accept_all


class RecordingBackend:
    """A masking backend that applies ``fn`` to each text and records what it was sent."""

    masks = True

    def __init__(self, fn: Callable[[str], str], name: str = "fake") -> None:
        self.fn = fn
        self.name = name
        self.sent: list[str] = []
        self.calls = 0

    def translate(self, texts: list[str], source: str, target: str) -> list[str]:
        self.calls += 1
        self.sent.extend(texts)
        return [self.fn(t) for t in texts]


@pytest.fixture
def recording() -> Any:
    """The RecordingBackend class."""
    return RecordingBackend
