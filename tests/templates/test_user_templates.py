"""User template directories, the template variables, and template errors (file and line named)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from promptgrid.errors import TemplateError
from promptgrid.records import Case
from promptgrid.templates import Renderer, render
from promptgrid.variants import Variant, load_grid
from support.builders import make_case

PIRATE = textwrap.dedent("""\
    persona: "Arr, ye be a function pirate."
    task: "Answer the question with calls."
    tool_call_no_tag: "Reply as {output_format}. {param_types}"
    tool_call_with_tag: "Reply as <TOOLCALL>{output_format}</TOOLCALL>. {param_types}"
    multiturn_behavior: "Keep going."
    available_tools: "Yer tools ({format}):\\n{functions}\\n"
    heading_task: "Yer Task"
""")


@pytest.fixture
def user_dir(tmp_path: Path) -> Path:
    (tmp_path / "styles").mkdir()
    (tmp_path / "styles" / "pirate.yaml").write_text(PIRATE, encoding="utf-8")
    (tmp_path / "short.j2").write_text(
        "{#- promptgrid: doc_flavour=bfcl -#}\n"
        "{{ text.persona }} [{{ return_format }}/{{ doc_format }}/{{ tool_call_tag }}/{{ prompt_format }}"
        "/{{ prompt_style }}/{{ instruction_language }}/{{ description_language }}]\n"
        "{{ tagged_output_format }}|{{ param_types }}|{{ case.id }}|{{ variant.id }}|{{ question }}\n"
        "{{ functions }}",
        encoding="utf-8",
    )
    (tmp_path / "chat.j2").write_text(
        "{% block system %}Tools: {{ functions }}{% endblock %}"
        "{% block user %}Q: {{ question }}{% endblock %}",
        encoding="utf-8",
    )
    (tmp_path / "bad_var.j2").write_text("line one\nline two\n{{ no_such_variable }}\n", encoding="utf-8")
    (tmp_path / "bad_key.j2").write_text("{{ text.persona }}\n{{ text.no_such_key }}", encoding="utf-8")
    (tmp_path / "bad_syntax.j2").write_text("ok\n{% if %}\n", encoding="utf-8")
    return tmp_path


def test_user_style_with_builtin_template(user_dir: Path, case: Case) -> None:
    r = Renderer(user_dir)
    plain = r.render(Variant(prompt_style="pirate", tool_call_tag=True), case).messages[0]["content"]
    assert plain.startswith("Arr, ye be a function pirate.Answer the question")
    assert "Reply as <TOOLCALL>[func_name1(" in plain and "Yer tools (json):\n[" in plain
    md = r.render(Variant(prompt_style="pirate", prompt_format="markdown"), case).messages[0]["content"]
    assert "## Yer Task\n" in md and "## Tool Call Format\n" in md  # optional headings fall back to classic


def test_user_template_sees_documented_variables(user_dir: Path, case: Case) -> None:
    v = Variant(template="short", return_format="concise_xml", tool_call_tag=True, doc_format="xml",
                prompt_style="pirate")
    messages = Renderer(user_dir).render(v, case).messages
    first, second, docs = messages[0]["content"].split("\n", 2)
    assert first == "Arr, ye be a function pirate. [concise_xml/xml/True/plaintext/pirate/en/en]"
    assert second.startswith("<TOOLCALL><functions><function name=\"func_name1\"><param name=")
    assert f"|case_1|{v.id}|What is 5 factorial?" in second
    assert "|The type fields of the parameters" in second
    assert docs.startswith('<function name="math.factorial">')
    assert messages[1] == {"role": "user", "content": "What is 5 factorial?"}


def test_user_template_blocks(user_dir: Path, case: Case) -> None:
    messages = Renderer(user_dir).render(Variant(template="chat", doc_format="python"), case).messages
    assert messages[0]["content"].startswith("Tools: # Function: math.factorial")
    assert messages[1] == {"role": "user", "content": "Q: What is 5 factorial?"}


def test_grid_with_template_dir(user_dir: Path, case: Case) -> None:
    grid_file = user_dir / "grid.yaml"
    grid_file.write_text("template_dir: .\ninclude:\n  - variants:\n      - {template: short, prompt_style: pirate}\n",
                         encoding="utf-8")
    grid = load_grid(grid_file)
    assert grid.template_dir == user_dir.resolve()
    prompt = Renderer(grid.template_dir).render(grid.variants[0], case)
    assert prompt.messages[0]["content"].startswith("Arr")
    assert render(grid.variants[0], case, template_dir=grid.template_dir).sha256 == prompt.sha256


def test_incomplete_user_style(tmp_path: Path, case: Case) -> None:
    (tmp_path / "styles").mkdir()
    (tmp_path / "styles" / "terse.yaml").write_text('persona: "Hi."\ntask: "Do."\n', encoding="utf-8")
    with pytest.raises(TemplateError, match=r"terse\.yaml: style 'terse' lacks key\(s\) tool_call_no_tag"):
        Renderer(tmp_path).render(Variant(prompt_style="terse"), case)


@pytest.mark.parametrize("content, match", [
    ("persona: 5\n", r"bad\.yaml:1: persona: the value must be a string"),
    ("- a\n- b\n", r"bad\.yaml:1: a catalog is a flat mapping"),
    ("persona: [\n", r"bad\.yaml:\d+: invalid YAML"),
    ("persona: !!python/name:os.system\n", r"bad\.yaml:1: tag !!python/name:os.system is not allowed"),
    ("? [a]\n: x\n", r"bad\.yaml:1: a key must be a plain string"),
    ("a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{k}: &{k} [{', '.join([f'*{p}'] * 10)}]\n" for p, k in zip("abcdef", "bcdefg", strict=True)),
     r"bad\.yaml: aliases \(\*name\) would expand the file"),
])
def test_invalid_user_catalog(tmp_path: Path, case: Case, content: str, match: str) -> None:
    (tmp_path / "styles").mkdir()
    (tmp_path / "styles" / "bad.yaml").write_text(content, encoding="utf-8")
    with pytest.raises(TemplateError, match=match):
        Renderer(tmp_path).render(Variant(prompt_style="bad"), case)


def test_user_files_may_not_shadow_builtins(tmp_path: Path) -> None:
    (tmp_path / "bfcl_v4.j2").write_text("x", encoding="utf-8")
    with pytest.raises(TemplateError, match="may not reuse the built-in name 'bfcl_v4'"):
        Renderer(tmp_path)
    (tmp_path / "bfcl_v4.j2").unlink()
    (tmp_path / "styles").mkdir()
    (tmp_path / "styles" / "classic.yaml").write_text("persona: x\n", encoding="utf-8")
    with pytest.raises(TemplateError, match="built-in name 'classic'"):
        Renderer(tmp_path)


def test_missing_template_dir() -> None:
    with pytest.raises(TemplateError, match="is not a directory"):
        Renderer("/nonexistent/templates")


# --------------------------------------------------------------------------- errors name file and line


def test_missing_template(user_dir: Path, case: Case) -> None:
    with pytest.raises(TemplateError, match=r"template 'shortt' not found: no shortt\.j2 in .*Did you mean 'short'"):
        Renderer(user_dir).render(Variant(template="shortt"), case)


def test_undefined_variable_names_file_and_line(user_dir: Path, case: Case) -> None:
    with pytest.raises(TemplateError) as info:
        Renderer(user_dir).render(Variant(template="bad_var"), case)
    msg = str(info.value)
    assert f"{user_dir / 'bad_var.j2'}:3: undefined variable" in msg and "no_such_variable" in msg
    assert "Variables a template can use:" in msg and "functions" in msg


def test_undefined_catalog_key_names_file_and_line(user_dir: Path, case: Case) -> None:
    with pytest.raises(TemplateError, match=r"bad_key\.j2:2: undefined variable.*no_such_key"):
        Renderer(user_dir).render(Variant(template="bad_key"), case)


def test_syntax_error_names_file_and_line(user_dir: Path, case: Case) -> None:
    with pytest.raises(TemplateError, match=r"bad_syntax\.j2:2: template syntax error"):
        Renderer(user_dir).render(Variant(template="bad_syntax"), case)


def test_unknown_style(case: Case) -> None:
    with pytest.raises(TemplateError, match="unknown prompt style 'clasic'. Did you mean 'classic'"):
        Renderer().render(Variant(prompt_style="clasic"), case)


def test_bad_template_option(tmp_path: Path, case: Case) -> None:
    (tmp_path / "opt.j2").write_text("{#- promptgrid: doc_flavour=fancy -#}\nx", encoding="utf-8")
    with pytest.raises(TemplateError, match=r"opt\.j2:1: doc_flavour must be bfcl or clean"):
        Renderer(tmp_path).render(Variant(template="opt"), case)


def test_module_level_render_reuses_default_renderer(case: Case) -> None:
    a = render(Variant(), case)
    b = render(Variant(), make_case())
    assert a.sha256 == b.sha256 and a.variant_id == Variant().id
