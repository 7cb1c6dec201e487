"""Keep API keys out of everything promptgrid writes.

Keys reach promptgrid through the environment (``OPENAI_API_KEY``, or the
variable a run config names in ``api_key_env``); they are passed to the
provider and never stored. Providers sometimes quote a key back in an error
message ("Incorrect API key provided: sk-..."), so every error message is
redacted before it is stored, logged or printed:

- the exact value of every environment variable whose name ends in ``_KEY``,
  ``_TOKEN``, ``_SECRET`` (or contains ``PASSWORD``/``API_KEY``);
- anything that looks like a key: ``sk-...`` style tokens, ``Bearer ...``,
  AWS access key ids, ``api_key=...``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

__all__ = ["REDACTED", "Redactor", "secret_values"]

REDACTED = "[REDACTED]"

_SECRET_NAME = re.compile(r"(_KEY|_TOKEN|_SECRET|PASSWORD|API_KEY|_KEY_ID)$|API_KEY|SECRET", re.IGNORECASE)
_PATTERNS = (
    re.compile(r"\b(?:sk|pk|rk|xai|gsk|hf)[-_][A-Za-z0-9_\-*.]{6,}"),
    re.compile(r"(?i)\bbearer\s+[^\s\"',}]+"),
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    re.compile(r"(?i)\b(api[_-]?key|x-api-key|authorization|token|secret)([\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+"),
)


def secret_values(environ: Mapping[str, str] | None = None, extra: Iterable[str] = ()) -> list[str]:
    """The values to redact: secret-looking environment variables plus ``extra``."""
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if _SECRET_NAME.search(k) and len(v) >= 6}
    values.update(v for v in extra if v and len(v) >= 4)
    # Longest first, so a key that contains another is replaced whole.
    return sorted(values, key=len, reverse=True)


class Redactor:
    """Replaces secrets in text. Built once per run (the environment is read then)."""

    def __init__(self, extra: Iterable[str] = (), environ: Mapping[str, str] | None = None) -> None:
        self.values = secret_values(environ, extra)

    def add(self, value: str | None) -> None:
        if value and len(value) >= 4 and value not in self.values:
            self.values = sorted([*self.values, value], key=len, reverse=True)

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
