"""Model text in reports and on the terminal: it cannot break out of a code fence, and control characters
(ANSI escapes, carriage returns, bidi overrides) are shown as visible escapes, never written raw."""

from __future__ import annotations

import dataclasses
import io
import re
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from promptgrid.display import escape_controls
from promptgrid.errors import ReportError
from promptgrid.matrix.cli import main
from promptgrid.matrix.report import aggregate
from promptgrid.matrix.report._html import html_report
from promptgrid.matrix.report._markdown import console_table, markdown_report
from promptgrid.matrix.report._model import ReportData
from promptgrid.matrix.running.results import ResultRow

RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
HOSTILE = (
    "Sure!\n```\n# Injected heading\n```\n~~~~~\n~~~~~\n"
    "\x1b[31mred\x1b[0m \x1b]8;;http://evil.example\x07link\x1b]8;;\x07 over\rwrite \u202eesrever\u202c\tend"
)


@pytest.fixture(scope="module")
def data(bfcl_rows: list[ResultRow]) -> ReportData:
    base = aggregate(bfcl_rows, n_resamples=200)
    ex = base.failure_examples[0]
    hostile = dataclasses.replace(ex, model="evil\x1b[2Jmodel", case_id="case\x1b[1A", text=HOSTILE)
    return dataclasses.replace(base, failure_examples=(hostile,))


def test_escape_controls_keeps_newlines_and_tabs() -> None:
    assert escape_controls("a\tb\nc\x1b[0m\r\x7f\x9b\u202e") == "a\tb\nc\\x1b[0m\\x0d\\x7f\\x9b\\u202e"
    assert escape_controls("日本語 ok\n") == "日本語 ok\n"


def test_markdown_fence_is_longer_than_any_run_in_the_text(data: ReportData) -> None:
    md = markdown_report(data)
    lines = md.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("`") and line.endswith("text"))
    fence = lines[start].strip()[: -len("text")]
    assert set(fence) == {"`"} and len(fence) == 6  # longest run in the text: 5 tildes
    end = next(i for i in range(start + 1, len(lines)) if lines[i].strip().startswith(fence[:3]) and
               set(lines[i].strip()) <= {"`"} and len(lines[i].strip()) >= len(fence))
    inside = "\n".join(line[2:] for line in lines[start + 1:end])
    assert inside.startswith("Sure!\n```\n# Injected heading\n```\n~~~~~\n~~~~~\n")
    assert "end" in inside.splitlines()[-1]  # the whole text stayed inside the fence
    assert "# Injected heading" not in "\n".join(lines[:start] + lines[end:])


@pytest.mark.parametrize("render", [markdown_report, html_report, console_table])
def test_no_raw_control_characters(data: ReportData, render: Callable[[ReportData], str]) -> None:
    out = render(data)
    assert not RAW.search(out)
    if render is not console_table:  # the console table shows no examples
        assert "\\x1b[31mred\\x1b[0m" in out and "\\x0dwrite" in out and "\\u202eesrever" in out
        assert "evil\\x1b[2Jmodel" in out and "case\\x1b[1A" in out


def test_tab_and_newline_survive_in_examples(data: ReportData) -> None:
    assert "\tend" in markdown_report(data)


def test_cli_error_line_escapes_control_characters(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    def fail(args: object) -> int:
        raise ReportError("server said: \x1b[2J\x1b[31mboom\rX")

    import promptgrid.matrix.cli as cli

    monkeypatch.setattr(cli, "_report", fail)
    assert main(["report", "somewhere"]) == 2
    err = capsys.readouterr().err
    assert err == "promptgrid: error: server said: \\x1b[2J\\x1b[31mboom\\x0dX\n"


def test_cli_render_escapes_dataset_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data_file = tmp_path / "cases.jsonl"
    data_file.write_text(
        '{"id": "c1", "question": [[{"role": "user", "content": "hi \\u001b[31mthere"}]], '
        '"function": [{"name": "f", "description": "d", "parameters": {"type": "dict", "properties": {}}}]}\n',
        encoding="utf-8",
    )
    code = main(["render", "bfcl_v4", "--dataset", f"jsonl:{data_file}", "--limit", "1",
                 "--variant",
                 "ret_fmt=python&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=plaintext&style=classic"])
    out = capsys.readouterr().out
    assert code == 0 and "hi \\x1b[31mthere" in out and "\x1b" not in out


def test_run_summary_escapes_provider_and_scorer_errors(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from promptgrid.matrix.cli import run as run_cli
    from promptgrid.matrix.running.runner import RunSummary

    summary = RunSummary(jobs=2, sent=2, errors=1, halted={"m": "401 \x1b[2Jbad key"}, score_failures=1,
                         score_error="ValueError: \x1b[31mx\r")
    run = SimpleNamespace(summary=summary, path=tmp_path, counts=dict, results=list, kind="single")  # no rows
    err = io.StringIO()
    run_cli.print_run(run, io.StringIO(), err)  # type: ignore[arg-type]
    text = err.getvalue()
    assert not RAW.search(text)
    assert "401 \\x1b[2Jbad key" in text and "ValueError: \\x1b[31mx\\x0d" in text
