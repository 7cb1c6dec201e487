"""Untrusted text (model output, server error messages) made safe to show in a terminal or a report.

Model text may hold ANSI escape sequences, carriage returns or bidirectional
overrides that rewrite what a terminal or a rendered report shows. Every
output that prints such text passes it through :func:`escape_controls`,
which replaces each control character by a visible escape (``\\x1b``,
``\\u202e``) and keeps newlines and tabs. It lives at the package root so
the CLI can use it without importing the report machinery.
"""

from __future__ import annotations

import re

__all__ = ["escape_controls"]

# C0 controls except tab and newline, DEL, C1 controls, and the bidi embedding/override/isolate characters.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    """``text`` with every control character (newline and tab excepted) written as a visible escape."""
    return _CONTROL.sub(_visible, text)
