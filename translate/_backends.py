"""Translation backends behind one small protocol, and how a ``--backend`` spec picks one.

A backend turns texts into texts::

    translate(texts: list[str], source: str, target: str) -> list[str]

The texts it receives have their protected spans replaced by tokens ``⟦n⟧``
(:mod:`._protect`) and it must return each token verbatim; the caller puts
the spans back and verifies them. Backends batch as they like; one call may
carry many texts. Third-party exceptions are converted into
``TranslationError`` inside each backend, once, at that boundary.

Backends (``--backend``):

- ``amazon``: Amazon Translate (:mod:`._amazon`), boto3 credentials;
- ``llm:MODEL``: every model ``promptgrid run`` takes (:mod:`._llm`): litellm
  model strings (with ``api_base`` / ``api_key_env`` for a server),
  ``local/...``, and the offline ``fake/auto`` / ``fake/prose``;
- ``catalog``: the reviewed catalogs shipped in ``translate/catalogs/``;
  ``catalog:PATH[,PATH...]``: the user's catalog files (imported as manual
  overrides). Catalog backends work on whole source strings (no tokens).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from promptgrid.languages import lookup_languages

from ._catalogs import CatalogIndex, TranslationCatalog, load_catalogs, shipped_catalogs
from ._errors import TranslationInputError
from ._units import UnitKind

__all__ = ["CatalogBackend", "TranslationBackend", "TranslationInputError", "make_backend"]


@runtime_checkable
class TranslationBackend(Protocol):
    """Anything that translates a batch of texts.

    ``name`` is the backend's id in the translation store; it must change
    whenever the backend would translate differently (model, formality).
    """

    @property
    def name(self) -> str: ...

    def translate(self, texts: list[str], source: str, target: str) -> list[str]: ...


class CatalogBackend:
    """Translations read from catalog files, looked up by their English source text.

    ``masks`` is False: catalogs hold whole reviewed strings, so the caller
    sends source texts as they are. ``override`` is True for the user's own
    files: their entries are stored as manual overrides.
    """

    masks = False

    def __init__(
        self, catalogs: Iterable[TranslationCatalog], *, name: str = "catalog", override: bool = False
    ) -> None:
        self.catalogs = tuple(catalogs)
        self.name = name
        self.override = override
        self._index = CatalogIndex(self.catalogs)

    @property
    def languages(self) -> tuple[str, ...]:
        """Languages the catalogs have entries for, sorted."""
        return tuple(sorted({c.language for c in self.catalogs if c.entries}))

    def covers(self, target: str) -> bool:
        """Whether any catalog has entries for ``target`` (``de-DE`` is covered by ``de``)."""
        return any(code in self.languages for code in lookup_languages(target))

    def lookup(self, text: str, target: str, key: str | None = None) -> str | None:
        """The catalog translation of ``text`` into ``target``, or None."""
        for kind in UnitKind:
            found = self._index.lookup(kind, text, target, key)
            if found is not None:
                return found
        return None

    def translate(self, texts: list[str], source: str, target: str) -> list[str]:
        out, missing = [], []
        for text in texts:
            found = self.lookup(text, target)
            if found is None:
                missing.append(text)
            out.append(found or "")
        if missing:
            raise TranslationInputError(
                f"{self.describe()} have no {target} translation of {len(missing)} text(s), e.g. "
                f"{missing[0][:80]!r}. Add them to a catalog file (--backend catalog:PATH), or translate with "
                "--backend amazon or llm:MODEL")
        return out

    def describe(self) -> str:
        """What the catalogs are, for messages: the shipped catalogs, or the user's files by name."""
        if not self.override:
            return "the shipped catalogs"
        paths = sorted({c.path for c in self.catalogs})
        shown = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
        return f"the catalog file(s) {shown}" if shown else "the catalog files given"


def make_backend(spec: str | TranslationBackend, *, region: str | None = None, formality: str | None = None,
                 timeout: float | None = None, on_retry: Callable[[str], None] | None = None,
                 api_base: str | Sequence[str] | None = None, api_key_env: str | None = None,
                 clients: Callable[..., Any] | None = None) -> TranslationBackend:
    """The backend a ``--backend`` value names (nothing is contacted yet); a backend object is returned as it is.

    Machine backends share the run's retry policy and redactor (``promptgrid.providers.RetryPolicy``,
    ``promptgrid.redact.Redactor``); ``timeout`` is the seconds each request may take (default
    ``promptgrid.providers.DEFAULT_TIMEOUT_S``) and ``on_retry`` hears, in one redacted line, why a retry waits.
    ``llm:MODEL`` takes every model ``promptgrid run`` takes: ``api_base`` and ``api_key_env`` (the name of the
    variable holding the key) as run's; ``clients`` makes the model's client as a run does
    (``promptgrid.matrix.clients.make_client``; needed for ``local/...``). Input that cannot work (an unknown
    backend or model, an unset key variable) raises ``TranslationInputError`` (exit 2).
    """
    if not isinstance(spec, str):
        if isinstance(getattr(spec, "name", None), str) and callable(getattr(spec, "translate", None)):
            return spec
        raise TranslationInputError(f"a backend is a spec (amazon, llm:MODEL, catalog[:PATH]) or an object with a "
                                    f"name and translate(texts, source, target), not {type(spec).__name__}")
    from promptgrid.providers import DEFAULT_TIMEOUT_S

    if timeout is not None and not 0 < timeout < float("inf"):
        raise TranslationInputError(f"--timeout must be a positive number of seconds, got {timeout}")
    timeout = DEFAULT_TIMEOUT_S if timeout is None else timeout
    spec = spec.strip()
    endpoint = bool(api_base) or api_key_env is not None
    if endpoint and not spec.startswith("llm:"):
        raise TranslationInputError(f"--api-base and --api-key-env apply to --backend llm:MODEL, not {spec!r}")
    if spec == "amazon":
        from ._amazon import AmazonTranslateBackend

        return AmazonTranslateBackend(region=region, formality=formality, timeout=timeout, on_retry=on_retry)
    if spec.startswith("llm:") and len(spec) > 4:
        from ._llm import LLMBackend

        return LLMBackend(spec[4:], timeout=timeout, on_retry=on_retry, api_base=api_base or None,
                          api_key_env=api_key_env, clients=clients)
    if spec == "catalog":
        return CatalogBackend(shipped_catalogs())
    if spec.startswith("catalog:") and len(spec) > 8:
        paths = [Path(p) for p in spec[8:].split(",") if p]
        return CatalogBackend(load_catalogs(paths), name="override", override=True)
    raise TranslationInputError(
        f"unknown translation backend {spec!r}; use one of: amazon, llm:MODEL (any model promptgrid run takes: "
        "llm:openai/gpt-4o-mini, llm:openai/NAME with --api-base URL, llm:local/smollm2-135m, llm:fake/auto), "
        "catalog, catalog:PATH"
    )
