"""Any LLM as a translator, through litellm's ``completion``.

The model gets a strict instruction (translate only; keep every ``⟦n⟧``
token; keep line breaks; add nothing) and a JSON request, and must answer
with the JSON object ``{"translations": [...]}``, one string per input, in
order. The answer is parsed strictly (one optional Markdown code fence is
tolerated, nothing else) and its length validated. Texts whose tokens came
back damaged, and batches whose answer cannot be parsed, are asked again
once; after that, a damaged text is returned as it is (the caller records
the damage for that unit) and an unusable answer raises ``TranslationError``.
Model output is data: it is parsed as JSON, never evaluated.

Provider errors are classified by ``promptgrid.providers`` (the mapping the
runner uses too); rate limits and transient failures are retried by its
``RetryPolicy`` with equal jitter (one caller retrying in sequence: every
wait is at least half the backoff window, and never shorter than the
server's Retry-After). Each attempt has the policy's ``timeout`` (default 60
s): a server that never answers ends in a ``TranslationError`` saying so.
Every message is passed through the run's ``Redactor`` (``promptgrid.redact``)
before it is raised, and every translation through its exact-value pass
before it is returned (a server that quotes the key back never gets it into
the store).
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Callable
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from promptgrid.errors import TranslationError
from promptgrid.languages import language_name
from promptgrid.providers import (
    DEFAULT_TIMEOUT_S,
    CallError,
    ErrorKind,
    RetryPolicy,
    convert_exception,
    credential_vars,
    import_litellm,
)
from promptgrid.redact import Redactor

from ._protect import TOKEN_RE

__all__ = ["LLMBackend", "parse_translations", "system_prompt"]


@lru_cache(maxsize=1)
def system_prompt() -> str:
    """The translator instruction (``translate/prompts/llm.yaml``; prompt text lives in data files)."""
    text = resources.files("promptgrid.translate").joinpath("prompts", "llm.yaml").read_text(encoding="utf-8")
    return str(yaml.safe_load(text)["system"])


_FENCE_RE = re.compile(r"^\s*```(?:json)?\s*\n?(.*?)\n?```\s*$", re.S)


class LLMBackend:
    """Translate with ``model`` (a litellm model string, e.g. ``openai/gpt-4o-mini``).

    ``completion`` defaults to ``litellm.completion``; tests pass a wrapper
    that adds ``mock_response``. ``completion_kwargs`` go to every call
    (``api_base``, ``temperature``, ...). A call is sent at most
    ``max_attempts`` times, waiting about ``base_delay * 2**n`` seconds
    (``sleep``, replaceable in tests) before retry ``n + 1``, each attempt
    given ``timeout`` seconds; ``retry`` replaces those three with a
    ``RetryPolicy``. ``redactor`` is the ``Redactor`` of every message and
    answer (a new one reads the environment); ``on_retry`` is told, in one
    redacted line, why a retry waits (the CLI prints it).
    """

    masks = True

    def __init__(self, model: str, *, batch_size: int = 20, completion: Callable[..., Any] | None = None,
                 max_attempts: int = 4, base_delay: float = 1.0, timeout: float = DEFAULT_TIMEOUT_S,
                 retry: RetryPolicy | None = None, redactor: Redactor | None = None,
                 on_retry: Callable[[str], None] | None = None, sleep: Callable[[float], None] = time.sleep,
                 **completion_kwargs: Any) -> None:
        if not model.strip():
            raise TranslationError("llm backend needs a model, e.g. --backend llm:openai/gpt-4o-mini")
        self.model = model
        self.batch_size = batch_size
        self._completion = completion
        try:
            self.retry = retry or RetryPolicy(max_attempts=max_attempts, base=base_delay, jitter=0.5, timeout=timeout)
        except ValueError as exc:
            raise TranslationError(f"llm backend: {exc}") from None
        self._sleep = sleep
        self._on_retry = on_retry
        self.completion_kwargs = {"temperature": 0.0, **completion_kwargs}
        self._redact = redactor or Redactor()
        self._redact.add_url(self.completion_kwargs.get("api_base"))
        self._redact.add(self.completion_kwargs.get("api_key"))
        self.requests = 0

    @property
    def name(self) -> str:
        return f"llm:{self.model}"

    def _complete(self) -> Callable[..., Any]:
        if self._completion is None:
            self._completion = import_litellm().completion
            self._redact.add_env(credential_vars(self.model))
        return self._completion

    def translate(self, texts: list[str], source: str, target: str) -> list[str]:
        out: list[str] = []
        for i in range(0, len(texts), self.batch_size):
            out.extend(self._batch(texts[i:i + self.batch_size], source, target))
        return out

    def _batch(self, texts: list[str], source: str, target: str) -> list[str]:
        try:
            results = self._ask(texts, source, target)
        except _Violation:
            # One more try for the whole batch; a second failure is an error.
            try:
                results = self._ask(texts, source, target)
            except _Violation as again:
                raise TranslationError(
                    f"{self.model} did not return usable translations into {target} after 2 attempts: {again}"
                ) from None
        damaged = [i for i, (src, out) in enumerate(zip(texts, results, strict=True)) if not _tokens_intact(src, out)]
        if damaged:
            try:
                retried = self._ask([texts[i] for i in damaged], source, target)
            except _Violation:
                return results
            for i, text in zip(damaged, retried, strict=True):
                if _tokens_intact(texts[i], text):
                    results[i] = text
        return results

    def _ask(self, texts: list[str], source: str, target: str) -> list[str]:
        system = system_prompt().format(source=language_name(source), target=language_name(target),
                                      count=len(texts))
        user = json.dumps({"source_language": source, "target_language": target, "texts": texts},
                          ensure_ascii=False)
        response = self._call([{"role": "system", "content": system}, {"role": "user", "content": user}])
        try:
            content = response.choices[0].message.content
        except (AttributeError, IndexError, TypeError):
            raise _Violation("the response has no message content") from None
        return [self._redact.exact(t) for t in parse_translations(content, len(texts))]

    def _call(self, messages: list[dict[str, str]]) -> Any:
        """One completion; rate limits and transient failures are retried with backoff and jitter."""
        completion = self._complete()
        attempts = 0
        while True:
            attempts += 1
            self.requests += 1
            try:
                return completion(model=self.model, messages=messages, response_format={"type": "json_object"},
                                  drop_params=True, **{"timeout": self.retry.timeout, "max_retries": 0,
                                                       **self.completion_kwargs})
            except Exception as exc:  # litellm raises many provider exception types; convert them all once
                error = convert_exception(exc, self._redact)
                if error.retryable and self.retry.allows(attempts, error.kind):
                    delay = self.retry.delay(attempts, error.retry_after)
                    if self._on_retry is not None:
                        self._on_retry(f"{self.name}: {_why(error, self.retry.timeout)}; retrying in {delay:.1f} s "
                                       f"(attempt {attempts + 1} of {self.retry.max_attempts})")
                    self._sleep(delay)
                    continue
                raise _translation_error(exc, error, self.model, self.retry.timeout, attempts) from None


class _Violation(Exception):
    """The model's answer broke the output contract."""


def parse_translations(content: Any, count: int) -> list[str]:
    """``{"translations": [...]}`` with ``count`` strings, else ``_Violation``."""
    if not isinstance(content, str) or not content.strip():
        raise _Violation("the answer is empty")
    fenced = _FENCE_RE.match(content)
    text = fenced.group(1) if fenced else content
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _Violation(f"the answer is not JSON ({exc.msg} at position {exc.pos})") from None
    if not isinstance(data, dict) or set(data) != {"translations"}:
        raise _Violation('the answer is not the object {"translations": [...]}')
    items = data["translations"]
    if not isinstance(items, list) or not all(isinstance(t, str) for t in items):
        raise _Violation('"translations" is not a list of strings')
    if len(items) != count:
        raise _Violation(f"expected {count} translations, got {len(items)}")
    return items


def _tokens_intact(source: str, translation: str) -> bool:
    def tokens(text: str) -> Counter[str]:
        return Counter(m.group(1) for m in TOKEN_RE.finditer(text))

    stray = TOKEN_RE.sub("", translation)
    return tokens(source) == tokens(translation) and "⟦" not in stray and "⟧" not in stray


def _why(error: CallError, timeout: float) -> str:
    """A failed attempt in a few words (its message is already redacted and one line)."""
    if error.kind is ErrorKind.TIMEOUT:
        return f"no answer within {timeout:g} s"
    return f"{error.kind.value} error ({error.message})"


def _translation_error(exc: Exception, error: CallError, model: str, timeout: float,
                       attempts: int) -> TranslationError:
    """A provider exception, classified as ``error`` (its message redacted, one line), -> TranslationError
    with what to do."""
    name = type(exc).__name__
    message = error.message or name
    kind = error.kind
    if kind is ErrorKind.TIMEOUT:
        return TranslationError(f"{model}: no answer within {timeout:g} s ({attempts} attempt(s)); the server may be "
                                "down or overloaded. Try again later, or give it longer with --timeout. Finished "
                                "translations are kept in the store.")
    if kind is ErrorKind.AUTH:
        return TranslationError(f"{model}: no usable API key ({message}). Set the provider's key "
                                "(e.g. OPENAI_API_KEY, ANTHROPIC_API_KEY) or AWS credentials for bedrock/ models.")
    if kind in (ErrorKind.NOT_FOUND, ErrorKind.BAD_REQUEST) and "model" in message.lower():
        return TranslationError(f"{model}: unknown or unusable model ({message}). Use a litellm model string "
                                "such as openai/gpt-4o-mini.")
    if kind is ErrorKind.RATE_LIMIT:
        return TranslationError(f"{model}: rate limited after retries ({message}); try again later. "
                                "Finished translations are kept in the store.")
    if error.retryable:
        return TranslationError(f"{model}: the provider could not be reached or failed ({message}).")
    return TranslationError(f"{model}: translation request failed ({message})")
