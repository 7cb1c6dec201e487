"""Hypothesis profiles for local runs and CI; tests/conftest.py registers and loads them.

Profiles set defaults only: a test's own ``@settings(max_examples=...)`` wins.

- ``dev``: 25 examples per property (hypothesis' default is 100); failing
  examples are remembered in ``.hypothesis/`` and replayed first.
- ``ci``: 200 examples, derandomized (the same examples on every run of the
  same code) and no example database, so a clean clone is reproducible.

Neither has a deadline: timing on a shared machine is not a test result.
"""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import settings

PROFILES: dict[str, settings] = {
    "dev": settings(max_examples=25, deadline=None),
    "ci": settings(max_examples=200, deadline=None, derandomize=True, database=None, print_blob=True),
}


def profile_name(environ: Mapping[str, str]) -> str:
    """``HYPOTHESIS_PROFILE`` when set; else ``ci`` where ``CI`` is set (and not 0/false), else ``dev``."""
    if environ.get("HYPOTHESIS_PROFILE"):
        return environ["HYPOTHESIS_PROFILE"]
    return "ci" if environ.get("CI", "").strip().lower() not in ("", "0", "false", "no") else "dev"


def load(environ: Mapping[str, str]) -> str:
    """Register both profiles, load the one ``environ`` selects and return its name."""
    for name, profile in PROFILES.items():
        settings.register_profile(name, profile)
    name = profile_name(environ)
    settings.load_profile(name)
    return name
