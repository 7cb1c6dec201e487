"""Locating bfcl-eval (wheel, folder, gorilla checkout, data folder, installed) and the experimental_bfcl style.

The fake bfcl-eval trees here hold made-up content, so these tests run without bfcl-eval.
"""

from __future__ import annotations

import importlib.util
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from promptgrid.errors import PromptgridError, TemplateError
from promptgrid.records import Case
from promptgrid.templates import BFCL_DATA_ENV, Renderer, _bfcl_source, find_bfcl, read_bfcl_assignments
from promptgrid.variants import Variant

FAKE_PROMPTS = '''\
raise SystemExit("this module is parsed, never run")
MAXIMUM_STEP_LIMIT = 20
PARAM_TYPE_MAPPING = {"python": "", "verbose_xml": "FAKE TYPES."}
PROMPT_STYLE_TEMPLATES = {
    "classic": {},
    "experimental": {
        "persona": "FAKE PERSONA.",
        "task": " FAKE TASK.",
        "tool_call_no_tag": "Use {output_format}. {param_types} Only that.",
        "tool_call_with_tag": "Use <TOOLCALL>{output_format}</TOOLCALL>. {param_types} Only that.",
        "multiturn_behavior": "FAKE MULTITURN.",
        "available_tools": "FAKE TOOLS {format}:\\n{functions}\\n",
    },
}
NOT_A_LITERAL = len("x")
'''


def _tree(root: Path) -> Path:
    pkg = root / "bfcl_eval"
    (pkg / "constants").mkdir(parents=True)
    (pkg / "data" / "possible_answer").mkdir(parents=True)
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "constants" / "default_prompts.py").write_text(FAKE_PROMPTS, encoding="utf-8")
    (pkg / "data" / "BFCL_v4_simple_python.json").write_text(json.dumps({"id": "simple_python_0"}) + "\n")
    return pkg


def _wheel(tmp_path: Path) -> Path:
    pkg = _tree(tmp_path / "src")
    wheel = tmp_path / "bfcl_eval-0.0.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for file in pkg.rglob("*"):
            if file.is_file():
                zf.write(file, file.relative_to(pkg.parent).as_posix())
    return wheel


@pytest.mark.parametrize("layout", ["package", "parent", "gorilla", "wheel", "data_only"])
def test_layouts(tmp_path: Path, layout: str) -> None:
    if layout == "wheel":
        path = _wheel(tmp_path)
    elif layout == "gorilla":
        _tree(tmp_path / "gorilla" / "berkeley-function-call-leaderboard")
        path = tmp_path / "gorilla"
    else:
        pkg = _tree(tmp_path)
        path = {"package": pkg, "parent": tmp_path, "data_only": pkg / "data"}[layout]
    source = find_bfcl(path)
    assert source is not None
    assert json.loads(source.read_text("data/BFCL_v4_simple_python.json"))["id"] == "simple_python_0"
    assert "BFCL_v4_simple_python.json" in source.list_dir("data")
    assert source.list_dir("data/possible_answer") == []
    if layout == "data_only":
        assert not source.exists("constants/default_prompts.py")
    else:
        values = read_bfcl_assignments(source, "constants/default_prompts.py",
                                       ("PARAM_TYPE_MAPPING", "NOT_A_LITERAL", "ABSENT"))
        assert values == {"PARAM_TYPE_MAPPING": {"python": "", "verbose_xml": "FAKE TYPES."}}


def test_env_variable_and_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = _tree(tmp_path)
    monkeypatch.setenv(BFCL_DATA_ENV, str(pkg))
    source = find_bfcl()
    assert source is not None and source.root == str(pkg)
    monkeypatch.setenv(BFCL_DATA_ENV, str(tmp_path / "missing"))
    with pytest.raises(PromptgridError, match=f"{BFCL_DATA_ENV}: .*does not exist.*pip install --no-deps bfcl-eval"):
        find_bfcl()
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TemplateError, match="--bfcl-data: .*holds no bfcl-eval files"):
        find_bfcl(empty, error=TemplateError)


def test_installed_package_is_found_without_import(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BFCL_DATA_ENV, raising=False)
    if importlib.util.find_spec("bfcl_eval") is None:
        assert find_bfcl() is None
        return
    source = find_bfcl()
    assert source is not None and source.exists("constants/default_prompts.py")


def test_experimental_bfcl_read_at_run_time(tmp_path: Path, case: Case) -> None:
    wheel = _wheel(tmp_path)
    v = Variant(prompt_style="experimental_bfcl", return_format="verbose_xml")
    system = Renderer(bfcl_data=wheel).render(v, case).messages[0]["content"]
    assert system.startswith("FAKE PERSONA. FAKE TASK.\n\nUse <functions>")
    assert "</functions>. FAKE TYPES. Only that." in system and "FAKE TOOLS xml" not in system
    assert "FAKE TOOLS json:\n[" in system
    md = Renderer(bfcl_data=wheel).render(Variant(prompt_style="experimental_bfcl", prompt_format="markdown"), case)
    assert "## Task\n FAKE TASK." in md.messages[0]["content"]  # headings from classic


def test_experimental_bfcl_without_bfcl_eval(monkeypatch: pytest.MonkeyPatch, case: Case) -> None:
    monkeypatch.delenv(BFCL_DATA_ENV, raising=False)
    monkeypatch.setattr(_bfcl_source, "_find_spec", lambda name: None)
    with pytest.raises(TemplateError, match=r"experimental_bfcl.*pip install --no-deps bfcl-eval"):
        Renderer().render(Variant(prompt_style="experimental_bfcl"), case)
    Renderer().render(Variant(prompt_style="experimental"), case)  # the blog's wording needs no bfcl-eval


def test_experimental_bfcl_unsupported_version(tmp_path: Path, case: Case) -> None:
    pkg = _tree(tmp_path)
    (pkg / "constants" / "default_prompts.py").write_text("PROMPT_STYLE_TEMPLATES = {}\n", encoding="utf-8")
    with pytest.raises(TemplateError, match=r"default_prompts\.py: no PROMPT_STYLE_TEMPLATES\['experimental'\]"):
        Renderer(bfcl_data=pkg).render(Variant(prompt_style="experimental_bfcl"), case)


def test_experimental_bfcl_from_installed_bfcl(bfcl: Any, case: Case) -> None:
    styles = bfcl.model_utils.PROMPT_STYLE_TEMPLATES["experimental"]
    system = Renderer().render(Variant(prompt_style="experimental_bfcl"), case).messages[0]["content"]
    assert system.startswith(styles["persona"] + styles["task"])


@pytest.mark.parametrize(("content", "message"), [
    (b"X = '\xff'\n", r"default_prompts\.py is not UTF-8 text \(byte 0xff at byte 6\)"),
    (b"X = " + b"[" * 100_000 + b"\n", r"default_prompts\.py: cannot read bfcl-eval's prompt styles"),
])
def test_hostile_default_prompts_is_one_template_error(tmp_path: Path, case: Case, content: bytes,
                                                       message: str) -> None:
    pkg = _tree(tmp_path)
    (pkg / "constants" / "default_prompts.py").write_bytes(content)
    with pytest.raises(TemplateError, match=message) as info:
        Renderer(bfcl_data=pkg).render(Variant(prompt_style="experimental_bfcl"), case)
    assert "\n" not in str(info.value)


def test_default_prompts_over_the_bound_is_refused(tmp_path: Path, case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    from promptgrid.errors import InputLimitError

    pkg = _tree(tmp_path)
    monkeypatch.setenv("PROMPTGRID_MAX_LINE_BYTES", "100")
    with pytest.raises(InputLimitError, match=r"default_prompts\.py: larger than 100 bytes"):
        Renderer(bfcl_data=pkg).render(Variant(prompt_style="experimental_bfcl"), case)
