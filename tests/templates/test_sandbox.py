"""Templates render in Jinja's immutable sandbox: an escape attempt is a TemplateError naming file and line,
and it has no side effect (grids with a template_dir are shared, so a template is untrusted input)."""

from __future__ import annotations

import re
import time
import tracemalloc
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
    with pytest.raises(TemplateError, match=r"bomb\.j2:1: .*over the template limit"):
        Renderer(tmp_path).render(Variant(template="bomb"), case)


def test_small_arithmetic_still_works(tmp_path: Path, case: Case) -> None:
    (tmp_path / "small.j2").write_text('{{ "-" * 3 }}{{ 2 ** 3 }}{{ 3 * 4 }}{{ [0] * 2 }}', encoding="utf-8")
    assert Renderer(tmp_path).render(Variant(template="small"), case).messages[0]["content"] == "---812[0, 0]"


# ---------------------------------------------------------------------------- bounds on size and time
# Each of these exhausted memory or CPU before the bounds (issue 20, Why 4: a 100 MiB sparse template cost
# 7.9 GB, the join 9.8 GB, center(2000000000) and nested ranges ran until killed). Now each is one
# TemplateError naming the file, its line and the limit, with little memory and time spent.

SIZE_BOMBS = {
    "join": "{% set y=[('a'*100000)]*100000 %}{{ y|join|length }}",
    "center_filter": "{{ 'a'|center(2000000000) }}",
    "center_method": "{{ 'a'.center(2000000000) }}",
    "ljust": "{{ 'a'.ljust(2000000000) }}",
    "zfill": "{{ 'a'.zfill(2000000000) }}",
    "percent": "{{ '%2000000000s' % 'a' }}",
    "percent_star": "{{ '%*s' % (2000000000, 'a') }}",
    "format_filter": "{{ '%2000000000s'|format('a') }}",
    "str_format": "{{ '{:2000000000}'.format('a') }}",
    "str_format_nested": "{{ '{:{w}}'.format('a', w=2000000000) }}",
    "replace_method": "{{ ('a'*1000000).replace('a', 'aaaa') }}",
    "replace_filter": "{{ ('a'*1000000)|replace('a', 'aaaa') }}",
    "indent": "{{ ('a\\n'*500000)|indent(100) }}",
    "expandtabs": "{{ ('\\t'*100000).expandtabs(100) }}",
    "translate": "{{ ('a'*100000).translate({97: 'b'*100}) }}",
    "str_join": "{{ ''.join([('a'*100000)]*100) }}",
    "tilde_doubling": "{% set ns = namespace(s='a'*1000000) %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}"
                      "{% endfor %}{{ ns.s|length }}",
    "plus_doubling": "{% set ns = namespace(s='a'*1000000) %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}"
                     "{% endfor %}{{ ns.s|length }}",
    "list_doubling": "{% set ns = namespace(l=['a'*100000]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}"
                     "{% endfor %}{{ ns.l|length }}",
    "output": "{% for i in range(100000) %}{{ 'a'*100 }}{% endfor %}",
    "power": "{{ (10**1000)**1000 }}",
    "int_squaring": "{% set ns = namespace(n=10**1000) %}{% for i in range(40) %}{% set ns.n = ns.n * ns.n %}"
                    "{% endfor %}{{ ns.n }}",
    "batch": "{{ [1]|batch(2000000000, 'x')|list|length }}",
    "sum": "{{ ([[1]*1000]*1001)|sum(start=[])|length }}",
    "objects": "{{ [case]*100000 }}",
    "fill": "{{ ('{x} ' * 1000)|fill(x='a'*10000) }}",
}


@pytest.mark.parametrize("bomb", sorted(SIZE_BOMBS))
def test_size_bombs_are_refused_before_they_are_built(tmp_path: Path, case: Case, bomb: str) -> None:
    (tmp_path / "bomb.j2").write_text("first line\n" + SIZE_BOMBS[bomb], encoding="utf-8")
    renderer = Renderer(tmp_path)
    tracemalloc.start()
    try:
        with pytest.raises(TemplateError) as info:
            renderer.render(Variant(template="bomb"), case)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    message = str(info.value)
    assert re.match(rf"{re.escape(str(tmp_path / 'bomb.j2'))}(:[23])?: .*template limit of [\d,]+", message), message
    assert "\n" not in message
    assert peak < 64 * 2**20, f"{peak:,} bytes"
    assert renderer.render(Variant(), case).messages  # the renderer stays usable


TIME_BOMBS = {
    "nested_ranges": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}x",
    "macro_recursion": "{% macro f(n) %}{% if n %}{{ f(n-1) }}{{ f(n-1) }}{% endif %}{% endmacro %}{{ f(40) }}",
    "loop_over_string": "{% set s = 'a'*1000000 %}{% for a in s %}{% for b in s %}{% endfor %}{% endfor %}",
}


@pytest.mark.parametrize("bomb", sorted(TIME_BOMBS))
def test_long_renders_stop_at_the_time_limit(tmp_path: Path, case: Case, bomb: str) -> None:
    (tmp_path / "slow.j2").write_text(TIME_BOMBS[bomb], encoding="utf-8")
    start = time.perf_counter()
    with pytest.raises(TemplateError, match=r"slow\.j2:1: the render took longer than the template limit of 0\.5 s "
                                            r"\(Renderer\(max_render_seconds=S\) raises it\)"):
        Renderer(tmp_path, max_render_seconds=0.5).render(Variant(template="slow"), case)
    assert time.perf_counter() - start < 5


def test_time_limit_is_per_render(tmp_path: Path, case: Case) -> None:
    (tmp_path / "loop.j2").write_text("{% for i in range(2000) %}{{ i }}{% endfor %}", encoding="utf-8")
    renderer = Renderer(tmp_path, max_render_seconds=0.5)
    start = time.perf_counter()
    while time.perf_counter() - start < 1.0:  # many renders in a row, longer than the limit in all
        assert renderer.render(Variant(template="loop"), case).messages[0]["content"].endswith("1999")


def test_a_sparse_100_mib_template_is_refused_without_reading_it(tmp_path: Path, case: Case) -> None:
    big = tmp_path / "big.j2"
    with big.open("wb") as f:
        f.truncate(100 * 2**20)
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(TemplateError) as info:
            Renderer(tmp_path).render(Variant(template="big"), case)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(info.value) == (f"{big}: the template is over the limit of 1,048,576 bytes (MAX_TEMPLATE_BYTES; "
                               "Renderer(max_template_bytes=N) raises it). Check that it is the file you meant.")
    assert time.perf_counter() - start < 2
    assert peak < 8 * 2**20, f"{peak:,} bytes"


def test_template_size_limit_is_an_option(tmp_path: Path, case: Case) -> None:
    (tmp_path / "t.j2").write_text("x" * 100, encoding="utf-8")
    assert Renderer(tmp_path, max_template_bytes=100).render(Variant(template="t"), case).messages
    with pytest.raises(TemplateError, match=r"t\.j2: the template is over the limit of 99 bytes"):
        Renderer(tmp_path, max_template_bytes=99).render(Variant(template="t"), case)


def test_non_utf8_template_names_the_file(tmp_path: Path, case: Case) -> None:
    (tmp_path / "t.j2").write_bytes(b"ok \xff\n")
    with pytest.raises(TemplateError, match=r"t\.j2: not UTF-8 text \(byte 3\)"):
        Renderer(tmp_path).render(Variant(template="t"), case)


def test_prompt_size_limit_names_the_option(case: Case) -> None:
    full = Renderer().render(Variant(), case).messages[0]["content"]
    assert len(full) > 200
    with pytest.raises(TemplateError, match=r"bfcl_v4\.j2(:\d+)?: .*template limit of 200( characters)? "
                                            r"\(Renderer\(max_prompt_chars=N\) raises it\)\.$"):
        Renderer(max_prompt_chars=200).render(Variant(), case)
    assert Renderer(max_prompt_chars=len(full)).render(Variant(), case).messages[0]["content"] == full


@pytest.mark.parametrize("option", ["max_template_bytes", "max_prompt_chars", "max_render_seconds"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1, 0, True, "5", None])
def test_bad_limits_are_refused(option: str, value: object) -> None:
    with pytest.raises(TemplateError, match=rf"^{option} must be a positive .*, not "):
        Renderer(**{option: value})  # type: ignore[arg-type]


def test_ordinary_template_features_still_work(tmp_path: Path, case: Case) -> None:
    (tmp_path / "ok.j2").write_text(
        "{{ 'ok ' ~ ('-' * 3) ~ (2 ** 3) ~ ['a', 'b']|join(',') ~ '%5s' % 'x' ~ 'a'.center(5) }}|"
        "{{ '{:>4}'.format(7) }}|{{ 'ab'|replace('a', 'xy') }}|{{ 'a\nb'|indent(2) }}|{{ [1, 2, 3]|sum }}|"
        "{{ [[1], [2]]|sum(start=[]) }}|{% for i in range(3) %}{{ loop.index }}{% endfor %}|"
        "{% set x %}{{ 'cap' }}{% endset %}{{ x }}|{% macro m(v) %}<{{ v }}>{% endmacro %}{{ m(1) }}|"
        "{{ [1, 2, 3]|batch(2)|list }}|{{ '%d%%'|format(5) }}",
        encoding="utf-8")
    assert Renderer(tmp_path).render(Variant(template="ok"), case).messages[0]["content"] == (
        "ok ---8a,b    x  a  |   7|xyb|a\n  b|6|[1, 2]|123|cap|<1>|[[1, 2], [3]]|5%")


def test_cli_render_of_a_bomb_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bomb.j2").write_text(SIZE_BOMBS["join"], encoding="utf-8")
    grid = tmp_path / "grid.yaml"
    grid.write_text("template_dir: .\ninclude:\n  - variants:\n      - {template: bomb}\n", encoding="utf-8")
    code = main(["render", str(grid), "--dataset", "mini", "--limit", "1"])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
    assert "bomb.j2:1: the repeated sequence would be 10,000,100,000 characters, over the template limit" \
        in captured.err


def test_a_big_user_style_is_refused_before_it_is_parsed(tmp_path: Path, case: Case) -> None:
    (tmp_path / "styles").mkdir()
    style = tmp_path / "styles" / "huge.yaml"
    style.write_text("persona: x\n" + "# padding\n" * 30_000, encoding="utf-8")
    start = time.perf_counter()
    with pytest.raises(TemplateError, match=r"huge\.yaml: the file is 300,011 bytes; style catalogs are limited to "
                                            r"262,144 bytes\."):
        Renderer(tmp_path).render(Variant(prompt_style="huge"), case)
    assert time.perf_counter() - start < 1


def test_endless_recursion_is_one_line(tmp_path: Path, case: Case) -> None:
    (tmp_path / "deep.j2").write_text("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", encoding="utf-8")
    with pytest.raises(TemplateError, match=r"deep\.j2:1: the template ran out of stack \(recursion too deep\)\.$"):
        Renderer(tmp_path).render(Variant(template="deep"), case)
