"""requirements.lock stays honest: made from today's pyproject.toml, and pinning all of it.

scripts/lock.sh writes the hash of the lock's inputs (scripts/lock_inputs.py) into its header; a
change to pyproject.toml's dependencies or to requirements/no-deps.in without ``bash
scripts/lock.sh`` fails here.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from support.scripts import load_script

pytest.importorskip("tomllib", reason="scripts/lock_inputs.py reads pyproject.toml with tomllib (Python 3.11+)")

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements.lock"
PYTHONS = ("3.10.14", "3.11.7", "3.12.1", "3.13.0")
"""One interpreter of each minor version requires-python admits that the lock is checked for."""

lock_inputs = load_script("scripts/lock_inputs.py")

REGENERATE = "pyproject.toml's dependencies changed without a new lock: run `bash scripts/lock.sh` and commit it"


def _header_hash(text: str) -> str:
    found = re.search(r"^# inputs-sha256: ([0-9a-f]{64})$", text, re.M)
    assert found is not None, "requirements.lock has no inputs-sha256 line: regenerate it with scripts/lock.sh"
    return found.group(1)


def _pins(text: str, python: str) -> dict[str, Version]:
    """Package -> pinned version for a Linux machine running ``python``."""
    env = {"python_full_version": python, "python_version": ".".join(python.split(".")[:2]),
           "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
           "implementation_name": "cpython", "platform_python_implementation": "CPython", "os_name": "posix"}
    pins: dict[str, Version] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        requirement, _, marker = line.partition(";")
        if marker.strip() and not Marker(marker.strip()).evaluate(env):
            continue
        name, _, version = requirement.strip().partition("==")
        assert version, f"requirements.lock: {line!r} is not pinned with =="
        pins[canonicalize_name(name)] = Version(version)
    return pins


def test_the_lock_is_made_from_todays_pyproject() -> None:
    assert _header_hash(LOCK.read_text(encoding="utf-8")) == lock_inputs.digest(ROOT), REGENERATE


@pytest.mark.parametrize("edit", [
    ('"litellm>=1.50"', '"litellm>=1.60"'),                 # a range
    ('"numpy>=1.24",', '"numpy>=1.24",\n    "rich>=13",'),  # a new dependency
    ('"pytest-timeout>=2.2"', '"pytest-timeout>=2.3"'),     # an extra
])
def test_a_dependency_change_without_a_new_lock_is_caught(tmp_path: Path, edit: tuple[str, str]) -> None:
    (tmp_path / "requirements").mkdir()
    shutil.copy(ROOT / "requirements" / "no-deps.in", tmp_path / "requirements" / "no-deps.in")
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert edit[0] in text
    (tmp_path / "pyproject.toml").write_text(text, encoding="utf-8")
    assert lock_inputs.digest(tmp_path) == lock_inputs.digest(ROOT)
    (tmp_path / "pyproject.toml").write_text(text.replace(edit[0], edit[1]), encoding="utf-8")
    assert lock_inputs.digest(tmp_path) != lock_inputs.digest(ROOT)


def test_a_comment_or_another_table_in_pyproject_does_not_ask_for_a_new_lock(tmp_path: Path) -> None:
    (tmp_path / "requirements").mkdir()
    shutil.copy(ROOT / "requirements" / "no-deps.in", tmp_path / "requirements" / "no-deps.in")
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text("# a comment\n" + text + "\n[tool.example]\nx = 1\n", encoding="utf-8")
    assert lock_inputs.digest(tmp_path) == lock_inputs.digest(ROOT)


@pytest.mark.parametrize("python", PYTHONS)
def test_every_requirement_is_pinned_within_its_range(python: str) -> None:
    pins = _pins(LOCK.read_text(encoding="utf-8"), python)
    inputs = lock_inputs.inputs(ROOT)
    wanted = [*inputs["dependencies"], *inputs["build-system"], *inputs["no-deps"],
              *(r for extra in inputs["extras"].values() for r in extra)]
    env = {"python_full_version": python, "python_version": ".".join(python.split(".")[:2]), "sys_platform": "linux"}
    for text in wanted:
        requirement = Requirement(text)
        if requirement.marker is not None and not requirement.marker.evaluate(env):
            continue
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement.name} is not in requirements.lock for Python {python}: {REGENERATE}"
        assert requirement.specifier.contains(pins[name], prereleases=True), \
            f"requirements.lock pins {name}=={pins[name]}, outside {requirement}: {REGENERATE}"


def test_the_installed_packages_are_the_locked_ones() -> None:
    """The venv the suite runs in was installed from the lock (skipped after ``install.sh --latest``)."""
    import importlib.metadata as metadata
    import platform

    stamp = ROOT / ".venv" / "promptgrid-install.sha256"
    if not stamp.exists() or not stamp.read_text(encoding="utf-8").strip().endswith(" lock"):
        pytest.skip("not a locked install (scripts/install.sh --latest, or another environment)")
    pins = _pins(LOCK.read_text(encoding="utf-8"), platform.python_version())
    for name in ("litellm", "pydantic", "openai", "jinja2", "numpy", "boto3"):
        assert Version(metadata.version(name)) == pins[canonicalize_name(name)], name
