"""Templates render in Jinja's immutable sandbox: an escape attempt is a TemplateError naming file and line,
and it has no side effect (grids with a template_dir are shared, so a template is untrusted input)."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptgrid.errors import TemplateError
from promptgrid.matrix.cli import main
from promptgrid.records import Case
from promptgrid.templates import Renderer
from promptgrid.variants import Variant

ESCAPES = {
    "popen": "{{{{ cycler.__init__.__globals__.os.popen('touch {marker}').read() }}}}",
    "open": "{{{{ cycler.__init__.__globals__.__builtins__.open('{marker}', 'w').write('x') }}}}",
    "lipsum": "{{{{ lipsum.__globals__['os'].system('touch {marker}') }}}}",
    "subclasses": "{{{{ ''.__class__.__mro__[1].__subclasses__() }}}}{{{{ '{marker}' }}}}",
    "mutate": "{{{{ formats.update({{'x': '{marker}'}}) }}}}",
}


@pytest.mark.parametrize("attack", sorted(ESCAPES))
def test_escape_attempt_is_blocked_with_file_and_line(tmp_path: Path, case: Case, attack: str) -> None:
    marker = tmp_path / "pwned"
    (tmp_path / "evil.j2").write_text("harmless first line\n" + ESCAPES[attack].format(marker=marker) + "\n",
                                      encoding="utf-8")
    renderer = Renderer(tmp_path)
    with pytest.raises(TemplateError) as info:
        renderer.render(Variant(template="evil"), case)
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'evil.j2'}:2: unsafe access blocked by the template sandbox")
    assert "\n" not in message
    assert not marker.exists()
    assert renderer.render(Variant(), case).messages  # the renderer stays usable


def test_builtin_templates_render_in_the_sandbox(case: Case) -> None:
    renderer = Renderer()
    for template in renderer.template_names():
        assert renderer.render(Variant(template=template), case).messages


def test_cli_render_of_an_escaping_template_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "pwned"
    (tmp_path / "evil.j2").write_text(ESCAPES["popen"].format(marker=marker), encoding="utf-8")
    grid = tmp_path / "grid.yaml"
    grid.write_text("template_dir: .\ninclude:\n  - variants:\n      - {template: evil}\n", encoding="utf-8")
    code = main(["render", str(grid), "--dataset", "mini", "--limit", "1"])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
    assert "evil.j2:1: unsafe access blocked by the template sandbox" in captured.err
    assert not marker.exists()


@pytest.mark.parametrize("expression", ['"x" * 10**7', "[1, 2] * 600000", "10 * 'ab' * 100000", "9 ** 99999999"])
def test_oversized_arithmetic_is_blocked(tmp_path: Path, case: Case, expression: str) -> None:
    (tmp_path / "bomb.j2").write_text("{{ " + expression + " }}", encoding="utf-8")
    with pytest.raises(TemplateError, match=r"bomb\.j2:1: unsafe access blocked .*over the template limit"):
        Renderer(tmp_path).render(Variant(template="bomb"), case)


def test_small_arithmetic_still_works(tmp_path: Path, case: Case) -> None:
    (tmp_path / "small.j2").write_text('{{ "-" * 3 }}{{ 2 ** 3 }}{{ 3 * 4 }}{{ [0] * 2 }}', encoding="utf-8")
    assert Renderer(tmp_path).render(Variant(template="small"), case).messages[0]["content"] == "---812[0, 0]"
