"""The package's public surface: __all__ complete, import without matplotlib."""

from __future__ import annotations

import subprocess
import sys

import promptgrid.matrix.report as report
from promptgrid.matrix.report import stats


def test_all_is_complete() -> None:
    public = {n for n in dir(report) if not n.startswith("_") and not isinstance(getattr(report, n), type(report))}
    assert public - {"annotations"} == set(report.__all__)
    for module in (report, stats):
        for name in module.__all__:
            assert hasattr(module, name), name


def test_import_does_not_pull_matplotlib() -> None:
    code = "import sys, promptgrid.matrix.report, promptgrid.matrix.cli.report; assert 'matplotlib' not in sys.modules"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_report_error_is_a_user_error() -> None:
    from promptgrid.errors import PromptgridError

    assert issubclass(report.ReportError, PromptgridError) and report.ReportError.exit_code == 2
