"""pyproject.toml ships every package and data file, in the form setuptools builds without warnings.

A wheel build needs setuptools from the network (build isolation), so this checks the
configuration itself, against the files git tracks (what a clean clone builds from): every
folder under the five package roots that holds files is a listed package (setuptools warns
about, and leaves out the data of, an importable folder it was not given), every data file
matches a package-data pattern of its own package, and the licence is an SPDX string (the
TOML table form is deprecated).
"""

from __future__ import annotations

import fnmatch
import subprocess
from pathlib import Path
from typing import Any

import pytest

tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).resolve().parents[1]
NOT_SHIPPED = ("*.md",)  # folder notes for readers of the source


def _pyproject() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)  # type: ignore[no-any-return]


def _tracked(folder: str) -> list[Path]:
    """The files git tracks under ``folder``: what a clean clone builds from (not others' work in progress)."""
    done = subprocess.run(["git", "ls-files", "-z", "--", folder], cwd=ROOT, capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip("not a git checkout")
    return [ROOT / name for name in done.stdout.decode().split("\0") if name]


def _folders() -> dict[str, list[Path]]:
    """Package name -> its files, for every folder under the package roots that holds a tracked file."""
    roots: dict[str, str] = _pyproject()["tool"]["setuptools"]["package-dir"]
    found: dict[str, list[Path]] = {}
    for package, folder in roots.items():
        for path in _tracked(folder):
            parts = path.parent.relative_to(ROOT / folder).parts
            found.setdefault(".".join([package, *parts]), []).append(path)
    return found


def test_every_folder_with_files_is_a_listed_package() -> None:
    setuptools = _pyproject()["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    assert sorted(set(_folders()) - listed) == [], "add these to [tool.setuptools] packages in pyproject.toml"
    roots: dict[str, str] = setuptools["package-dir"]
    for package in listed:  # and every listed package has its folder
        root = max((r for r in roots if package == r or package.startswith(r + ".")), key=len)
        folder = ROOT / roots[root] / Path(*package.removeprefix(root).split(".")[1:])
        assert folder.is_dir(), f"{package}: no folder {folder.relative_to(ROOT)}"


def test_every_data_file_matches_its_packages_package_data() -> None:
    package_data: dict[str, list[str]] = _pyproject()["tool"]["setuptools"]["package-data"]
    unshipped = []
    for package, files in _folders().items():
        patterns = package_data.get(package, [])
        for path in files:
            if path.suffix != ".py" and not any(fnmatch.fnmatch(path.name, p) for p in NOT_SHIPPED):
                if not any(fnmatch.fnmatch(path.name, p) for p in patterns):
                    unshipped.append(str(path.relative_to(ROOT)))
    assert unshipped == [], "add these to [tool.setuptools.package-data] in pyproject.toml"


def test_license_is_an_spdx_string_with_a_setuptools_that_reads_it() -> None:
    data = _pyproject()
    assert data["project"]["license"] == "Apache-2.0"
    assert "setuptools>=77" in data["build-system"]["requires"]
