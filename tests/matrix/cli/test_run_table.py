"""The table ``promptgrid run`` ends with prints ``Run.accuracy()``'s numbers (the report's cells and intervals):
one accuracy computation, not a second one beside it."""

from __future__ import annotations

import io
import re
from pathlib import Path

import promptgrid as pg
from promptgrid.matrix.cli.run import accuracy_table, print_run

CELL = re.compile(r"(\d+\.\d)% \[(\d+), (\d+)\] \((\d+)/(\d+)")


def test_the_run_table_is_run_accuracy(tmp_path: Path) -> None:
    run = pg.run("call_modes", "mini:en", models=["fake/auto", "openai/served"], api_base="http://127.0.0.1:9/v1",
                 run_dir=tmp_path / "r", limit=3, max_retries=0, timeout=1)
    table = accuracy_table(run)
    lines = table.splitlines()
    expected = {(a.label, a.model): a for a in run.accuracy()}
    models = ["fake/auto", "openai/served"]
    seen = 0
    for line in lines[2:-1]:
        label = next(lab for lab, _m in expected if line.startswith(lab + "  "))
        for model, cell in zip(models, re.split(r"\s{2,}", line[len(label):].strip()), strict=True):
            a = expected.get((label, model))
            if a is None:
                assert cell == "unsupported"  # constrained on a server with no constraints option
                continue
            acc, low, high, correct, n = CELL.match(cell).groups()  # type: ignore[union-attr]
            assert (float(acc), int(low), int(high), int(correct), int(n)) == (
                round(100 * a.accuracy, 1), round(100 * a.ci_low), round(100 * a.ci_high), a.correct, a.n)
            assert (", 3 err" in cell) == (model == "openai/served")  # nothing listens there: failed calls
            seen += 1
    assert seen == len(expected) and lines[-1].startswith("all variants")
    out = io.StringIO()
    print_run(run, out, io.StringIO())
    assert out.getvalue().startswith(table)
