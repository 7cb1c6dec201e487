"""The hypothesis profiles (support/profiles.py): which one loads, and that a test's own settings win."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support.profiles import PROFILES, profile_name


@pytest.mark.parametrize(
    ("environ", "name"),
    [
        ({}, "dev"),
        ({"CI": "true"}, "ci"),
        ({"CI": "1"}, "ci"),
        ({"CI": "false"}, "dev"),
        ({"CI": "0"}, "dev"),
        ({"CI": ""}, "dev"),
        ({"HYPOTHESIS_PROFILE": "ci"}, "ci"),
        ({"CI": "true", "HYPOTHESIS_PROFILE": "dev"}, "dev"),
    ],
)
def test_profile_follows_the_environment(environ: dict[str, str], name: str) -> None:
    assert profile_name(environ) == name


def test_ci_is_reproducible_and_dev_is_quicker() -> None:
    ci, dev = PROFILES["ci"], PROFILES["dev"]
    assert ci.derandomize and ci.database is None and ci.deadline is None
    assert dev.max_examples < settings.get_profile("default").max_examples < ci.max_examples
    assert dev.deadline is None


def _examples_run(**own: int) -> int:
    seen: list[int] = []

    @settings(database=None, **own)
    @given(st.integers())
    def prop(x: int) -> None:
        seen.append(x)

    prop()
    return len(seen)


def test_profile_sets_the_default_and_a_tests_own_count_wins() -> None:
    loaded = PROFILES[profile_name(os.environ)]
    assert _examples_run() == loaded.max_examples
    assert _examples_run(max_examples=7) == 7
    assert _examples_run(max_examples=loaded.max_examples + 13) == loaded.max_examples + 13
