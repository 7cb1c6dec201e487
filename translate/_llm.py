"""Any LLM as a translator: every model ``promptgrid run`` takes.

``--backend llm:MODEL`` takes the model strings of ``promptgrid run``:

- a litellm model string (``openai/gpt-4o-mini``, ``bedrock/...``; ``openai/NAME``
  with ``api_base`` for a vLLM, llama.cpp or other OpenAI-compatible server,
  the key read from the variable ``api_key_env`` names);
- ``local/smollm2-135m`` or ``local/PATH.gguf``: the in-process local model,
  its answer held to the JSON shape below by a grammar;
- ``fake/auto``: offline and free, for tests: each text comes back marked with
  the target language (``[de] Hello``), its tokens intact; ``fake/prose``
  answers prose (an answer that is not JSON); ``@SECONDS`` adds a latency.

Real models are sent through the run's own clients
(``promptgrid.matrix.clients``, given as ``clients``: this package sits below
``matrix``), so they get what a run's calls get: the same litellm call,
endpoint handling and key redaction. Without ``clients`` a litellm model
string is sent with litellm's ``completion`` (``completion`` replaces it in
tests).

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

A model string that cannot be used (an unknown fake, a litellm model with no
provider, an ``api_key_env`` that is not set) is a ``TranslationInputError``
(exit 2) when the backend is made, before anything is sent or stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Sequence
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from promptgrid.errors import PromptgridError, TranslationError
from promptgrid.languages import language_name
from promptgrid.providers import (
    DEFAULT_TIMEOUT_S,
    CallError,
    ErrorKind,
    RetryPolicy,
    call_error,
    convert_exception,
    credential_vars,
    import_litellm,
    retried_sync,
)
from promptgrid.redact import Redactor

from ._errors import TranslationInputError
from ._protect import TOKEN_RE

__all__ = ["FAKE_TRANSLATORS", "LLMBackend", "parse_translations", "system_prompt"]

FAKE_TRANSLATORS = ("fake/auto", "fake/prose")
"""The offline fake models that can translate (``@SECONDS`` adds a latency): ``fake/auto`` marks each text
with the target language, tokens intact; ``fake/prose`` answers prose, never the JSON asked for."""

_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@lru_cache(maxsize=1)
def system_prompt() -> str:
    """The translator instruction (``translate/prompts/llm.yaml``; prompt text lives in data files)."""
    text = resources.files("promptgrid.translate").joinpath("prompts").joinpath("llm.yaml").read_text(encoding="utf-8")
    return str(yaml.safe_load(text)["system"])


_FENCE_RE = re.compile(r"^\s*```(?:json)?\s*\n?(.*?)\n?```\s*$", re.S)


class LLMBackend:
    """Translate with ``model``: a litellm model string (``openai/gpt-4o-mini``), ``local/...`` or ``fake/...``.

    ``clients`` makes the model's client the way a run does
    (``promptgrid.matrix.clients.make_client``: called as ``clients(model, api_base=..., api_key_env=...,
    redactor=...)``); it is needed for ``local/...`` models. Without it a litellm model string is sent with
    ``completion`` (default ``litellm.completion``; tests pass a wrapper that adds ``mock_response``).
    ``api_base``: the server (one URL, or several replicas); ``api_key_env``: the NAME of the variable that
    holds its key (never the key). ``completion_kwargs`` go to every call (``temperature``, ...). A call is
    sent at most ``max_attempts`` times, waiting about ``base_delay * 2**n`` seconds (``sleep``, replaceable
    in tests) before retry ``n + 1``, each attempt given ``timeout`` seconds; ``retry`` replaces those three
    with a ``RetryPolicy``. ``redactor`` is the ``Redactor`` of every message and answer (a new one reads
    the environment); ``on_retry`` is told, in one redacted line, why a retry waits (the CLI prints it).
    ``close()`` ends the client (the CLI calls it; garbage collection does it otherwise).
    """

    masks = True

    def __init__(self, model: str, *, batch_size: int = 20, completion: Callable[..., Any] | None = None,
                 clients: Callable[..., Any] | None = None, api_base: str | Sequence[str] | None = None,
                 api_key_env: str | None = None, max_attempts: int = 4, base_delay: float = 1.0,
                 timeout: float = DEFAULT_TIMEOUT_S, retry: RetryPolicy | None = None,
                 redactor: Redactor | None = None, on_retry: Callable[[str], None] | None = None,
                 sleep: Callable[[float], None] = time.sleep, **completion_kwargs: Any) -> None:
        if not isinstance(model, str) or not model.strip():
            raise TranslationInputError("the llm backend needs a model, e.g. --backend llm:openai/gpt-4o-mini, "
                                        "llm:local/smollm2-135m or llm:fake/auto")
        self.model = model.strip()
        self.batch_size = batch_size
        try:
            self.retry = retry or RetryPolicy(max_attempts=max_attempts, base=base_delay, jitter=0.5, timeout=timeout)
        except ValueError as exc:
            raise TranslationInputError(f"llm backend: {exc}") from None
        self._sleep = sleep
        self._on_retry = on_retry
        self.completion_kwargs = {"temperature": 0.0, **completion_kwargs}
        self.api_bases: tuple[str, ...] = (api_base,) if isinstance(api_base, str) else tuple(api_base or ())
        self.api_key_env = api_key_env
        self._redact = redactor or Redactor()
        for url in self.api_bases:
            self._redact.add_url(url)
        self._redact.add(self.completion_kwargs.get("api_key"))
        self.requests = 0
        self._completion = completion
        self._fake: _FakeTranslator | None = None
        self._client: Any = None
        self._loop: _LoopThread | None = None
        self._check_endpoint()
        if self.model.startswith("fake/"):
            if self.api_bases or api_key_env:
                raise TranslationInputError(f"{self.model} answers in-process: --api-base and --api-key-env apply "
                                            "to litellm models (openai/NAME --api-base URL)")
            self._fake = _FakeTranslator(self.model)
        elif completion is None and clients is not None:
            self._client = self._make_client(clients)
        elif self.model.startswith("local/"):
            raise TranslationInputError(f"{self.model}: local models translate through promptgrid's model clients; "
                                        "pass clients=promptgrid.matrix.clients.make_client (the CLI and "
                                        "promptgrid.translate_conversations do)")
        elif completion is None:
            self._check_provider()

    @property
    def name(self) -> str:
        return f"llm:{self.model}"

    def _check_endpoint(self) -> None:
        """``api_base`` and ``api_key_env`` as run checks them: URLs, a variable name that is set."""
        for url in self.api_bases:
            if not isinstance(url, str) or not re.match(r"https?://[^/\s]+", url):
                raise TranslationInputError(f"--api-base must be an http:// or https:// URL such as "
                                            f"http://127.0.0.1:8000/v1, not {self._redact(str(url))!r}")
        env = self.api_key_env
        if env is None:
            return
        if not isinstance(env, str) or not _ENV_NAME_RE.fullmatch(env):
            raise TranslationInputError(f"--api-key-env takes the NAME of the variable holding the key "
                                        f"(e.g. MY_SERVER_KEY), not {self._redact(str(env))!r}")
        if not os.environ.get(env):
            raise TranslationInputError(f"--api-key-env {env}: the variable {env} is not set; export it "
                                        f"(export {env}=...) and run again")
        self._redact.add_env([env])

    def _make_client(self, clients: Callable[..., Any]) -> Any:
        """The run's client for the model (made before anything is stored: a model it refuses is input)."""
        if self.model.startswith("local/") and (self.api_bases or self.api_key_env):
            raise TranslationInputError(f"{self.model} runs in-process: --api-base and --api-key-env apply to "
                                        "litellm models (openai/NAME --api-base URL)")
        if not self.model.startswith("local/"):
            self._check_provider()
        try:
            return clients(self.model, api_base=list(self.api_bases) or None, api_key_env=self.api_key_env,
                           redactor=self._redact)
        except TranslationError:
            raise
        except PromptgridError as exc:  # an unknown model kind, a missing extra or weights: the caller's input
            if exc.exit_code == 2:
                raise
            raise TranslationInputError(f"{self.model}: {exc}") from None

    def _check_provider(self) -> None:
        """A litellm model string litellm can send (its provider known), or ``TranslationInputError``."""
        if self.model.startswith("replay/"):
            raise TranslationInputError(f"{self.model}: replay models answer stored jobs, not translations; use "
                                        "a litellm model, local/smollm2-135m or fake/auto")
        lt = import_litellm()
        try:
            lt.get_llm_provider(self.model, api_base=self.api_bases[0] if self.api_bases else None)
        except Exception:  # noqa: BLE001 - litellm raises its BadRequestError for a model it cannot place
            raise TranslationInputError(
                f"{self.model}: litellm knows no provider for this model. Use a litellm model string such as "
                "openai/gpt-4o-mini (openai/NAME --api-base URL for an OpenAI-compatible server), "
                "local/smollm2-135m, or fake/auto (offline, for tests)") from None

    def close(self) -> None:
        """End the model client and its event loop (nothing to do for the fake and litellm's completion)."""
        loop, client = self._loop, self._client
        self._loop = None
        if loop is not None:
            if client is not None:
                try:
                    loop.run(client.aclose(), None)
                except Exception:  # noqa: BLE001, S110 - closing: nothing left to report to
                    pass
            loop.stop()

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
        content = self._call([{"role": "system", "content": system}, {"role": "user", "content": user}], texts)
        return [self._redact.exact(t) for t in parse_translations(content, len(texts))]

    def _call(self, messages: list[dict[str, str]], texts: list[str]) -> Any:
        """One answer's text; rate limits and transient failures are retried with backoff and jitter."""
        tries = [0]

        def attempt(number: int) -> Any:
            tries[0] = number
            self.requests += 1
            return self._send(messages, texts)

        def heard(error: CallError, number: int, delay: float) -> None:
            if self._on_retry is not None:
                self._on_retry(self._redact(f"{self.name}: {_why(error, self.retry.timeout)}; retrying in "
                                            f"{delay:.1f} s (attempt {number + 1} of {self.retry.max_attempts})"))

        try:
            return retried_sync(attempt, self.retry, sleep=self._sleep, on_retry=heard)
        except CallError as error:
            raise _translation_error(error, self.model, self.retry.timeout, tries[0], self._redact) from None

    def _send(self, messages: list[dict[str, str]], texts: list[str]) -> Any:
        """The text of one answer (``_Violation`` when there is none); a failed call is a ``CallError``."""
        if self._fake is not None:
            return self._fake.answer(messages)
        if self._client is not None:
            return self._send_client(messages, texts)
        completion = self._completion
        if completion is None:
            completion = self._completion = import_litellm().completion
            self._redact.add_env(credential_vars(self.model, self.api_key_env))
        kwargs: dict[str, Any] = {"timeout": self.retry.timeout, "max_retries": 0, **self.completion_kwargs}
        if self.api_bases:
            kwargs["api_base"] = self.api_bases[0]
        if self.api_key_env:
            kwargs["api_key"] = os.environ.get(self.api_key_env)
        try:
            response = completion(model=self.model, messages=messages, response_format={"type": "json_object"},
                                  drop_params=True, **kwargs)
        except CallError:
            raise
        except Exception as exc:  # litellm raises many provider exception types; convert them all once
            raise convert_exception(exc, self._redact) from None
        try:
            return response.choices[0].message.content
        except (AttributeError, IndexError, TypeError):
            raise _Violation("the response has no message content") from None

    def _send_client(self, messages: list[dict[str, str]], texts: list[str]) -> str:
        """One call through the run's client, on this backend's event loop (any caller, any thread)."""
        params: dict[str, Any] = {**self.completion_kwargs, "timeout": self.retry.timeout}
        request: dict[str, Any] | None = None
        if self.model.startswith("local/"):
            # The local model is held to the answer's shape by a grammar; its length bounded by the texts'.
            request = {"call_mode": "constrained", "grammar": translations_grammar(len(texts))}
            params.setdefault("max_tokens", 256 + 2 * sum(len(t) for t in texts))
        else:
            params["response_format"] = {"type": "json_object"}
        if self._loop is None:
            self._loop = _LoopThread(self)
        call = self._client.complete(messages, params) if request is None else \
            self._client.complete(messages, params, request=request)
        answer = self._loop.run(call, self.retry.timeout + 5.0)
        return str(getattr(answer, "text", "") or "")


class _LoopThread:
    """An event loop on a daemon thread: the run's clients are async, a translation backend is called in
    sequence from any thread (inside a caller's own running loop too). Stopped by ``stop`` or when the
    backend is collected."""

    def __init__(self, owner: object) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="promptgrid-translate", daemon=True)
        self.thread.start()
        self._finalizer = weakref.finalize(owner, _stop_loop, self.loop, self.thread)

    def run(self, coro: Any, timeout: float | None) -> Any:
        """``coro``'s result; past ``timeout`` seconds a ``timeout`` ``CallError`` (the client's own timeout
        comes first; this bounds a client that ignores it)."""
        async def bounded() -> Any:
            if timeout is None:
                return await coro
            try:
                return await asyncio.wait_for(coro, timeout)
            except asyncio.TimeoutError:
                raise call_error(ErrorKind.TIMEOUT, f"no answer within {timeout:g} s") from None

        return asyncio.run_coroutine_threadsafe(bounded(), self.loop).result()

    def stop(self) -> None:
        self._finalizer()


def _stop_loop(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    """As ``asyncio.run`` ends its loop: the tasks left (litellm's logging worker) cancelled, then closed."""
    if loop.is_closed():
        return

    async def drain() -> None:
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await loop.shutdown_asyncgens()

    if loop.is_running() and thread is not threading.current_thread():
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(drain(), loop).result(timeout=5)
    loop.call_soon_threadsafe(loop.stop)
    if thread is not threading.current_thread():
        thread.join(timeout=5)
    if not loop.is_running():
        loop.close()


class _FakeTranslator:
    """``fake/auto`` and ``fake/prose`` (``@SECONDS``): offline answers to the translation request."""

    def __init__(self, name: str) -> None:
        mode, _, latency = name.removeprefix("fake/").partition("@")
        if f"fake/{mode}" not in FAKE_TRANSLATORS:
            raise TranslationInputError(
                f"{name} cannot translate: the fake translators are {', '.join(FAKE_TRANSLATORS)} (fake/auto "
                "marks each text with the target language, fake/prose answers prose), optionally @SECONDS")
        try:
            self.latency = float(latency) if latency else 0.0
        except ValueError:
            raise TranslationInputError(f"fake model {name!r}: latency after '@' must be a number of "
                                        "seconds") from None
        if not 0 <= self.latency < 3600:
            raise TranslationInputError(f"fake model {name!r}: latency after '@' must be from 0 to 3600 seconds")
        self.mode = mode

    def answer(self, messages: list[dict[str, str]]) -> str:
        if self.latency:
            time.sleep(self.latency)
        if self.mode == "prose":
            return "I am a fake model: I answer in prose, not with the JSON asked for."
        request = json.loads(messages[-1]["content"])
        target = request["target_language"]
        return json.dumps({"translations": [f"[{target}] {text}" for text in request["texts"]]},
                          ensure_ascii=False)


def translations_grammar(count: int) -> str:
    """A GBNF grammar (llama.cpp) of exactly ``{"translations": [...]}`` with ``count`` JSON strings."""
    items = ' ws "," ws '.join(["string"] * count)
    return "\n".join((
        f'root ::= "{{" ws "\\"translations\\"" ws ":" ws "[" ws {items} ws "]" ws "}}"',
        r'string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] '
        r'[0-9a-fA-F] ) )* "\""',
        r'ws ::= [ \n]?',
    )) + "\n"


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


def _translation_error(error: CallError, model: str, timeout: float, attempts: int,
                       redact: Callable[[str], str]) -> TranslationError:
    """A failed call, classified as ``error`` (its message redacted, one line), -> TranslationError with what to
    do; a model or key the provider refuses is the caller's input (``TranslationInputError``, exit 2)."""
    message = redact(error.message or error.kind.value)
    kind = error.kind
    if kind is ErrorKind.TIMEOUT:
        return TranslationError(f"{model}: no answer within {timeout:g} s ({attempts} attempt(s)); the server may be "
                                "down or overloaded. Try again later, or give it longer with --timeout. Finished "
                                "translations are kept in the store.")
    if kind is ErrorKind.AUTH:
        return TranslationInputError(f"{model}: no usable API key ({message}). Set the provider's key "
                                     "(e.g. OPENAI_API_KEY, ANTHROPIC_API_KEY; --api-key-env VAR for a server's) or "
                                     "AWS credentials for bedrock/ models.")
    if kind in (ErrorKind.NOT_FOUND, ErrorKind.BAD_REQUEST) and "model" in message.lower():
        return TranslationInputError(f"{model}: unknown or unusable model ({message}). Use a model string "
                                     "promptgrid run takes: a litellm one such as openai/gpt-4o-mini (openai/NAME "
                                     "--api-base URL for a server), local/smollm2-135m, or fake/auto.")
    if kind is ErrorKind.RATE_LIMIT:
        return TranslationError(f"{model}: rate limited after retries ({message}); try again later. "
                                "Finished translations are kept in the store.")
    if error.retryable:
        return TranslationError(f"{model}: the provider could not be reached or failed ({message}).")
    return TranslationError(f"{model}: translation request failed ({message})")
