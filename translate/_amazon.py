"""Amazon Translate backend (boto3 ``translate_text``), as in MASSIVE-Agents section 3.3.

Protected spans travel as HTML: each token becomes
``<span translate="no">⟦n⟧</span>``, which Amazon Translate leaves alone
(its "do-not-translate" feature of TranslateText), and the rest of the text
is HTML-escaped; the answer is unwrapped and unescaped. (TranslateText has no
content-type parameter: it recognizes the HTML itself.)

A request carries at most 10,000 bytes of text, so long texts are cut into
chunks at line, sentence, then word boundaries, never inside a token. Line
breaks are kept by translating line by line (HTML would fold them).

Throttling (``TooManyRequestsException``, ``ThrottlingException``),
transient server errors and timeouts are retried with exponential backoff
and jitter by the shared ``promptgrid.providers.RetryPolicy``; botocore's own
retries are switched off so there is one retry policy, and its connect and
read timeouts are the policy's ``timeout``. Every botocore error is turned
into ``TranslationError`` here, with what to do (e.g. how to configure
credentials), its message passed through the shared ``Redactor``
(``promptgrid.redact``) and folded to one line.
"""

from __future__ import annotations

import html
import random
import re
import time
from collections.abc import Callable
from typing import Any

from promptgrid.errors import MissingDependencyError, TranslationError
from promptgrid.languages import base_language
from promptgrid.providers import DEFAULT_TIMEOUT_S, CallError, ErrorKind, RetryPolicy, one_line, retried_sync
from promptgrid.redact import Redactor

from ._protect import TOKEN_RE

__all__ = ["AmazonTranslateBackend", "MAX_REQUEST_BYTES"]

#: Amazon Translate's limit on the text of one TranslateText request (UTF-8 bytes).
MAX_REQUEST_BYTES = 10_000
_RETRYABLE = frozenset({
    "TooManyRequestsException", "ThrottlingException", "Throttling", "ServiceUnavailableException",
    "InternalServerException", "RequestTimeout", "RequestTimeoutException",
})
_CREDENTIAL_CODES = frozenset({
    "UnrecognizedClientException", "InvalidSignatureException", "ExpiredTokenException",
    "AccessDeniedException", "InvalidClientTokenId", "SignatureDoesNotMatch",
})
_CREDENTIALS_HELP = (
    "Configure AWS credentials with `aws configure` (or `aws sso login`), or set AWS_PROFILE, or "
    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary credentials); "
    "the identity needs the translate:TranslateText permission."
)
#: Where boto3 reads credentials from the environment: their values are redacted from every message.
_AWS_CREDENTIALS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK")
_SPAN_RE = re.compile(r"<span\s+translate\s*=\s*[\"']?no[\"']?\s*>(.*?)</span\s*>", re.S | re.I)


class AmazonTranslateBackend:
    """Amazon Translate through boto3; the client is created on first use.

    ``client``, ``sleep`` and ``rng`` are for tests (botocore's Stubber, no
    real waiting).
    """

    masks = True

    def __init__(
        self,
        region: str | None = None,
        formality: str | None = None,
        *,
        client: Any = None,
        max_attempts: int = 6,
        base_delay: float = 0.5,
        max_delay: float = 20.0,
        max_bytes: int = MAX_REQUEST_BYTES,
        timeout: float = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy | None = None,
        redactor: Redactor | None = None,
        on_retry: Callable[[str], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: Callable[[], float] = random.random,
    ) -> None:
        if formality is not None and formality.upper() not in ("FORMAL", "INFORMAL"):
            raise TranslationError(f"--formality must be FORMAL or INFORMAL, got {formality!r}")
        self.region = region
        self.formality = formality.upper() if formality else None
        self._client = client
        # Equal jitter: one caller retrying in sequence always waits half the window.
        try:
            self.retry = retry or RetryPolicy(max_attempts=max_attempts, base=base_delay, cap=max_delay, jitter=0.5,
                                              timeout=timeout)
        except ValueError as exc:
            raise TranslationError(f"amazon backend: {exc}") from None
        self._redact = redactor or Redactor()
        self._redact.add_env(_AWS_CREDENTIALS)
        self._on_retry = on_retry
        self.max_bytes = max_bytes
        self._sleep = sleep
        self._rng = rng
        self.requests = 0

    @property
    def name(self) -> str:
        """Store id: formality changes the wording; the region does not."""
        return f"amazon:{self.formality.lower()}" if self.formality else "amazon"

    # -- client -------------------------------------------------------------
    @property
    def client(self) -> Any:
        if self._client is None:
            try:
                import boto3
                from botocore.config import Config
                from botocore.exceptions import BotoCoreError
            except ImportError as exc:  # pragma: no cover - boto3 is a dependency
                raise MissingDependencyError("The Amazon Translate backend", "pip install boto3") from exc
            try:
                self._client = boto3.client(
                    "translate", region_name=self.region,
                    config=Config(retries={"total_max_attempts": 1, "mode": "standard"},
                                  connect_timeout=self.retry.timeout, read_timeout=self.retry.timeout),
                )
            except BotoCoreError as exc:
                raise self._error(exc) from None
        return self._client

    # -- protocol -------------------------------------------------------------
    def translate(self, texts: list[str], source: str, target: str) -> list[str]:
        return [self._translate_text(text, source, target) for text in texts]

    def _translate_text(self, text: str, source: str, target: str) -> str:
        out: list[str] = []
        for part in re.split(r"(\n)", text):
            core = part.strip()
            if not core or not re.search(r"[^\W\d_]", TOKEN_RE.sub("", core)):
                out.append(part)
                continue
            lead = part[: len(part) - len(part.lstrip())]
            trail = part[len(part.rstrip()):]
            joiner = "" if base_language(target) in ("ja", "zh") else " "
            pieces = [self._request(chunk, source, target) for chunk in self.chunks(core)]
            out.append(lead + joiner.join(p.strip() for p in pieces) + trail)
        return "".join(out)

    # -- html ---------------------------------------------------------------------
    @staticmethod
    def to_html(text: str) -> str:
        """Escape the prose, wrap each token in a do-not-translate span."""
        out, pos = [], 0
        for m in TOKEN_RE.finditer(text):
            out.append(html.escape(text[pos:m.start()], quote=False))
            out.append(f'<span translate="no">{m.group(0)}</span>')
            pos = m.end()
        out.append(html.escape(text[pos:], quote=False))
        return "".join(out)

    @staticmethod
    def from_html(text: str) -> str:
        return html.unescape(_SPAN_RE.sub(lambda m: m.group(1), text))

    def _size(self, text: str) -> int:
        return len(self.to_html(text).encode("utf-8"))

    def chunks(self, text: str) -> list[str]:
        """Cut ``text`` (one line) into pieces whose request stays within ``max_bytes``.

        Cuts at sentence ends first, then between words, and only as a last
        resort inside a word; never inside a token.
        """
        return [c.strip() for c in self._split(text, 0) if c.strip()]

    def _split(self, text: str, level: int) -> list[str]:
        if self._size(text) <= self.max_bytes:
            return [text]
        if level == 0:
            pieces = re.split(r"(?<=[.!?;:。！？])(?=\s)", text)
        elif level == 1:
            pieces = re.findall(r"\s*\S+", text)
        else:
            cut = self._hard_cut(text)
            return [text[:cut], *self._split(text[cut:], 2)]
        if len(pieces) <= 1:
            return self._split(text, level + 1)
        out: list[str] = []
        current = ""
        for piece in pieces:
            if self._size(current + piece) <= self.max_bytes:
                current += piece
                continue
            if current:
                out.append(current)
            if self._size(piece) <= self.max_bytes:
                current = piece
            else:
                out.extend(self._split(piece, level + 1))
                current = ""
        if current:
            out.append(current)
        return out

    def _hard_cut(self, text: str) -> int:
        """Largest prefix length within the limit that does not split a token."""
        lo, hi = 1, len(text)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._size(text[:mid]) <= self.max_bytes:
                lo = mid
            else:
                hi = mid - 1
        for m in TOKEN_RE.finditer(text):
            if m.start() < lo < m.end():
                return max(1, m.start())
        return lo

    # -- request ----------------------------------------------------------------------
    def _request(self, text: str, source: str, target: str) -> str:
        params: dict[str, Any] = {
            "Text": self.to_html(text),
            "SourceLanguageCode": source,
            "TargetLanguageCode": target,
        }
        if self.formality:
            params["Settings"] = {"Formality": self.formality}
        from botocore.exceptions import BotoCoreError, ClientError, ConnectTimeoutError, ReadTimeoutError

        client = self.client
        tries = [0]
        failed: list[Exception] = []  # the last failure, for the message once retries are spent

        def attempt(number: int) -> str:
            tries[0] = number
            try:
                self.requests += 1
                response = client.translate_text(**params)
                translated = response["TranslatedText"]
                if not isinstance(translated, str):
                    raise TypeError
                return self._redact.exact(self.from_html(translated))
            except (KeyError, TypeError):
                raise TranslationError("Amazon Translate answered without a TranslatedText string") from None
            except (ClientError, ReadTimeoutError, ConnectTimeoutError) as exc:
                timed_out = not isinstance(exc, ClientError)
                code = "timeout" if timed_out else exc.response.get("Error", {}).get("Code", "")
                failed[:] = [exc]
                if timed_out:  # retried as the policy allows (its kind counts as timeouts count elsewhere)
                    raise CallError(ErrorKind.TIMEOUT, f"no answer within {self.retry.timeout:g} s") from None
                if code in _RETRYABLE:
                    raise CallError(ErrorKind.SERVER, code) from None
                raise self._error(exc, source, target) from None
            except BotoCoreError as exc:
                raise self._error(exc, source, target) from None

        def heard(error: CallError, number: int, delay: float) -> None:
            if self._on_retry is not None:
                self._on_retry(f"amazon: {error.message}; retrying in {delay:.1f} s "
                               f"(attempt {number + 1} of {self.retry.max_attempts})")

        try:
            return retried_sync(attempt, self.retry, sleep=self._sleep, on_retry=heard, rand=self._rng)
        except CallError as error:  # retries spent
            if error.kind is ErrorKind.TIMEOUT:
                raise TranslationError(f"Amazon Translate: no answer within {self.retry.timeout:g} s "
                                       f"({tries[0]} attempt(s)); try again later, or give it longer with "
                                       "--timeout. Finished translations are kept in the store.") from None
            raise self._error(failed[0], source, target) from None

    def _error(self, exc: Exception, source: str = "", target: str = "") -> TranslationError:
        """``_convert``'s error, its message redacted and one line."""
        error = _convert(exc, source, target)
        return type(error)(one_line(self._redact(str(error))))


def _convert(exc: Exception, source: str = "", target: str = "") -> TranslationError:
    """One botocore error -> one TranslationError that says what to do."""
    from botocore.exceptions import (
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
        NoRegionError,
        ParamValidationError,
        PartialCredentialsError,
    )

    if isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
        return TranslationError(f"Amazon Translate: no usable AWS credentials were found. {_CREDENTIALS_HELP}")
    if isinstance(exc, NoRegionError):
        return TranslationError("Amazon Translate: no AWS region is configured. Pass --region (e.g. us-east-1) "
                                "or set AWS_REGION / AWS_DEFAULT_REGION.")
    if isinstance(exc, EndpointConnectionError):
        return TranslationError(f"Amazon Translate: cannot reach the endpoint ({exc}). Check the network "
                                "and --region.")
    if isinstance(exc, ParamValidationError):
        return TranslationError(f"Amazon Translate rejected the request before sending it: {exc}")
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code, message = error.get("Code", "?"), error.get("Message", "")
        if code in _CREDENTIAL_CODES:
            return TranslationError(f"Amazon Translate refused the credentials ({code}: {message}). "
                                    f"{_CREDENTIALS_HELP}")
        if code == "UnsupportedLanguagePairException":
            return TranslationError(f"Amazon Translate does not translate {source} -> {target} ({message}). "
                                    "Use another --to code (e.g. zh, zh-TW, pt, fr-CA) or another backend.")
        if code in _RETRYABLE:
            return TranslationError(f"Amazon Translate kept throttling or failing ({code}) after retries; "
                                    "try again later. Finished translations are kept in the store.")
        return TranslationError(f"Amazon Translate failed: {code}: {message}")
    return TranslationError(f"Amazon Translate failed: {exc}")
