"""Keep API keys out of everything promptgrid writes: the one redactor of every path that talks to a provider.

It lives in the package root, below every layer, so the runner and the
model clients (``promptgrid.matrix``), the translation backends
(``promptgrid.translate``), the batch backends and ``promptgrid status`` use
this one class; :func:`promptgrid.providers.convert_exception` passes every
provider message through it.

Keys reach promptgrid through the environment (``OPENAI_API_KEY``, or the
variable a run config names in ``api_key_env``); they are passed to the
provider and never stored. Providers sometimes quote a key back in an error
message ("Incorrect API key provided: sk-..."), so every error message is
redacted before it is stored, logged or printed:

- the exact value of every environment variable whose name has a part
  ``KEY``, ``APIKEY``, ``TOKEN``, ``SECRET``, ``PASSWORD``, ``CREDENTIALS``, ...
  (``OPENAI_API_KEY``, ``WATSONX_APIKEY``, ``AWS_BEARER_TOKEN_BEDROCK``), and of
  every variable the chosen providers read credentials from, whatever its name
  and whatever the value looks like (``Redactor.add_env``);
- the user name, password and key-like query values of an ``api_base``
  (``Redactor.add_url``), while ``redact_url`` gives the URL to record;
- anything that looks like a key: ``sk-...`` style tokens, ``Bearer ...``,
  AWS access key ids, ``api_key=...``.

Model answers are redacted by exact value only (``Redactor.exact``): a
pattern could eat real answer text.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

__all__ = ["REDACTED", "Redactor", "redact_url", "secret_values", "url_secrets"]

REDACTED = "[REDACTED]"

# A name part (between underscores) that marks a credential: OPENAI_API_KEY, WATSONX_APIKEY, AWS_SESSION_TOKEN,
# AWS_BEARER_TOKEN_BEDROCK, AZURE_CLIENT_SECRET, DB_PASSWORD, VERTEXAI_CREDENTIALS.
_SECRET_PART = re.compile(r"(?:^|_)(?:KEY|APIKEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|PWD|CREDENTIALS?|AUTH|PAT)(?:_|$)"
                          r"|API_?KEY|SECRET|PASSWORD", re.IGNORECASE)
# Query parameters of a URL that carry a credential (``?api_key=...``, ``&sig=...``).
_SECRET_QUERY = re.compile(r"key|token|secret|pass|pwd|auth|sig|signature|credential|code", re.IGNORECASE)
_PATTERNS = (
    re.compile(r"\b(?:sk|pk|rk|xai|gsk|hf)[-_][A-Za-z0-9_\-*.]{6,}"),
    re.compile(r"(?i)\bbearer\s+[^\s\"',}]+"),
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    re.compile(r"(?i)\b(api[_-]?key|x-api-key|authorization|token|secret)([\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+"),
)


def secret_values(environ: Mapping[str, str] | None = None, extra: Iterable[str] = ()) -> list[str]:
    """The values to redact: secret-looking environment variables plus ``extra``."""
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if _SECRET_PART.search(k) and len(v) >= 6}
    values.update(v for v in extra if v and len(v) >= 4)
    # Longest first, so a key that contains another is replaced whole.
    return sorted(values, key=len, reverse=True)


def url_secrets(url: str | None) -> list[str]:
    """The credentials inside a URL: user name, password and the values of key-like query parameters."""
    if not url:
        return []
    parts = urlsplit(url)
    out = [v for v in (parts.username, parts.password) if v]
    out += [v for k, v in parse_qsl(parts.query, keep_blank_values=False) if _SECRET_QUERY.search(k)]
    # Also as written in the URL (percent-encoded), in case a message quotes it raw.
    out += [quote(v, safe="") for v in out if quote(v, safe="") != v]
    return out


def redact_url(url: str | None) -> str | None:
    """``url`` without credentials, for everything written (run.json, messages): user info and key-like query
    values become ``[REDACTED]``; the call itself keeps the full URL."""
    if not url:
        return url
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rpartition('@')[2]}"
    query = "&".join(f"{k}={REDACTED}" if _SECRET_QUERY.search(k) else (f"{k}={v}" if sep else k)
                     for k, sep, v in (item.partition("=") for item in parts.query.split("&") if item))
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


class Redactor:
    """Replaces secrets in text. Built once per run (the environment is read then)."""

    def __init__(self, extra: Iterable[str] = (), environ: Mapping[str, str] | None = None) -> None:
        self.values = secret_values(environ, extra)

    def add(self, value: str | None) -> None:
        """Redact ``value`` from now on (a key read from a variable the config names)."""
        if value and len(value) >= 4 and value not in self.values:
            self.values = sorted([*self.values, value], key=len, reverse=True)

    def add_env(self, names: Iterable[str], environ: Mapping[str, str] | None = None) -> None:
        """Redact the values of these variables (the ones a provider reads), whatever their names look like."""
        env = os.environ if environ is None else environ
        for name in names:
            self.add(env.get(name))

    def add_url(self, url: str | None) -> None:
        """Redact the credentials inside ``url`` (an ``api_base`` such as ``https://user:pass@host/v1?key=...``)."""
        for value in url_secrets(url):
            self.add(value)

    def exact(self, text: str) -> str:
        """Replace only the known secret values (cheap; safe on model output)."""
        for value in self.values:
            if value in text:
                text = text.replace(value, REDACTED)
        return text

    def __call__(self, text: str) -> str:
        """Replace known values and anything that looks like a key (for error messages)."""
        text = self.exact(text)
        for pattern in _PATTERNS:
            if pattern.groups == 2:
                text = pattern.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
            else:
                text = pattern.sub(REDACTED, text)
        return text
