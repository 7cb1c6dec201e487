"""What requirements.lock is made from, as one hash.

``scripts/lock.sh`` writes the hash into the lock's header; ``tests/test_lock.py`` recomputes it,
so a change to pyproject.toml's dependencies (or to requirements/no-deps.in) without a new lock
fails the suite. The inputs: ``requires-python``, the dependencies, the extras the lock covers,
the build system's requirements and the no-deps pins. Reformatting pyproject.toml, or editing
anything else in it, does not change the hash.

    python scripts/lock_inputs.py            # prints the hash
    python scripts/lock_inputs.py --build    # prints the build-system requirements, one a line
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import tomllib  # Python 3.11+: making or checking the lock needs it (installing from it does not)

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = ("test", "lint", "local", "pandas")
"""The extras the lock covers (local: llama-cpp-python, built from source by scripts/install_local.sh)."""
NO_DEPS = Path("requirements") / "no-deps.in"


def no_deps_pins(root: Path = ROOT) -> list[str]:
    lines = (root / NO_DEPS).read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def inputs(root: Path = ROOT) -> dict[str, Any]:
    pyproject = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    project = pyproject["project"]
    extras = project.get("optional-dependencies", {})
    return {
        "requires-python": project.get("requires-python"),
        "dependencies": sorted(project.get("dependencies", [])),
        "extras": {name: sorted(extras.get(name, [])) for name in EXTRAS},
        "build-system": sorted(pyproject.get("build-system", {}).get("requires", [])),
        "no-deps": sorted(no_deps_pins(root)),
    }


def digest(root: Path = ROOT) -> str:
    canonical = json.dumps(inputs(root), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


if __name__ == "__main__":
    if sys.argv[1:] == ["--build"]:
        print("\n".join(inputs()["build-system"]))
    else:
        print(digest())
