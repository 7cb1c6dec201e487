"""Internal signal a sub-parser raises to report a failure.

Sub-parsers return plain lists of calls on success (the hot path, no record
built) and raise :class:`Fail` on failure; the public entry points catch it
and build the :class:`ParseResult`. It never leaves the package.
"""

from __future__ import annotations

from ._result import BFCL_DECODER_FAILED, Deviation, ParseFailure

__all__ = ["Fail"]


class Fail(Exception):
    """A parse failure: kind, one-line details, bfcl-eval's outcome, deviation."""

    def __init__(
        self,
        kind: ParseFailure,
        details: str,
        *,
        bfcl_error_type: str | None = BFCL_DECODER_FAILED,
        deviation: Deviation | None = None,
    ) -> None:
        super().__init__(details)
        self.kind = kind
        self.details = details
        self.bfcl_error_type = bfcl_error_type
        self.deviation = deviation

    def fresh(self) -> Fail:
        """A new, equal Fail: memoized failures are re-raised as copies, never
        as the same object (raising one object again grows its traceback)."""
        return Fail(self.kind, self.details, bfcl_error_type=self.bfcl_error_type, deviation=self.deviation)
