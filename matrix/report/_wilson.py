"""The Wilson score interval, without numpy: ``score-file`` prints one and should not import the report's statistics
(``stats`` re-exports both names)."""

from __future__ import annotations

import math
from statistics import NormalDist

__all__ = ["DEFAULT_CONFIDENCE", "wilson_interval"]

DEFAULT_CONFIDENCE = 0.95


def wilson_interval(successes: int, n: int, confidence: float = DEFAULT_CONFIDENCE) -> tuple[float, float]:
    """Wilson score interval for ``successes / n``; ``(nan, nan)`` when ``n == 0``."""
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return (math.nan, math.nan)
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    p = successes / n
    z2 = z * z
    denom = 1 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    # At 0 and n the bound is exactly 0 / 1 (rounding would leave 0.9999999999999999).
    lo = 0.0 if successes == 0 else max(0.0, center - half)
    hi = 1.0 if successes == n else min(1.0, center + half)
    return (lo, hi)
