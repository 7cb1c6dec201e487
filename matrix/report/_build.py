"""``build_report``: rows in, report files out (the entry point of ``promptgrid report``)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from promptgrid.errors import ReportError
from promptgrid.matrix.report import stats
from promptgrid.safeio import atomic_write

from ._adaptive import adaptive_console
from ._compute import aggregate
from ._csv import csv_files
from ._latex import latex_tables
from ._markdown import console_table, markdown_report
from ._model import FigureRef, PendingJobs, ReportData
from ._rows import Rows

__all__ = ["FORMATS", "ReportResult", "build_report", "expand_formats", "write_files"]

# md: report.md (+ figures/); csv: results.csv and the other tables; latex: tables.tex;
# html: report.html (figures embedded); json: report.json; figures: figures/*.png and *.svg.
FORMATS = ("md", "csv", "latex", "html", "json", "figures")


def expand_formats(formats: Iterable[str]) -> set[str]:
    """Validate format names; ``all`` means every format."""
    out: set[str] = set()
    for f in formats:
        if f == "all":
            out |= set(FORMATS)
        elif f in FORMATS:
            out.add(f)
        else:
            raise ReportError(f"unknown report format {f!r}; choose from {', '.join(FORMATS)} or all.")
    return out


@dataclass(frozen=True)
class ReportResult:
    """What was computed and which files were written (empty when no out_dir was given)."""

    data: ReportData
    files: tuple[Path, ...]
    console: str

    def __repr__(self) -> str:
        """One line (``data`` holds every number, ``console`` the table): the size and the files written."""
        if self.files:
            where = os.path.commonpath([str(f.parent) for f in self.files])
            written = f"{len(self.files)} files in {where!r}"
        else:
            written = "no files written"
        return f"ReportResult({self.data.shape()}; {written})"


SMALL_ROWS = 50_000
"""Up to this many rows, the report's statistics run with one BLAS thread (``build_report``)."""


def build_report(
    rows: Rows,
    out_dir: Path | None,
    *,
    baseline: str | None,
    formats: set[str],
    n_resamples: int = stats.DEFAULT_RESAMPLES,
    seed: int = stats.DEFAULT_SEED,
    confidence: float = stats.DEFAULT_CONFIDENCE,
    mid_p: bool = False,
    pending: PendingJobs | None = None,
    adaptive: Sequence[Mapping[str, Any]] = (),
) -> ReportResult:
    """Aggregate ``rows`` (``ResultRow``, or dicts as exported) and write the requested formats into ``out_dir``.

    ``pending``: the jobs the run directory's last invocation left without a result (``PendingJobs``), which
    rows alone cannot show; every format states them. ``adaptive``: what an adaptive run found
    (``AdaptiveResult.to_dict()`` per model), shown in its own section (md, html, json, console, a figure).

    Output is deterministic: the same rows and options give byte-identical
    files (seeded bootstrap, fixed figure metadata, no timestamps).
    """
    wanted = expand_formats(formats)
    from promptgrid.matrix.running.findings import one_blas_thread

    rows = rows if isinstance(rows, Sequence) else list(rows)
    # The bootstrap's products are small for a study of this size: one BLAS thread (measured: the report of a
    # 520-row adaptive run took 6-9 s with OpenBLAS's default threads on a busy two-core machine, 1.3-2.2 s with
    # one). A larger study keeps the library's threads.
    limit = one_blas_thread() if len(rows) <= SMALL_ROWS else contextlib.nullcontext()
    with limit:
        data = aggregate(rows, baseline=baseline, n_resamples=n_resamples, seed=seed, confidence=confidence,
                         mid_p=mid_p, pending=pending)
    if adaptive:
        data = dataclasses.replace(data, adaptive=tuple(dict(a) for a in adaptive))
    console = console_table(data) + adaptive_console(data.adaptive)
    if out_dir is None or not wanted:
        return ReportResult(data, (), console)
    write = _Writer(_report_dir(Path(out_dir)))
    figures, refs = _figures(data, wanted, write)
    _write_formats(data, wanted, figures, refs, write)
    return ReportResult(data, tuple(write.written), console)


_ELSEWHERE = "write the report elsewhere with --out DIR (out=DIR in Python), e.g. for a read-only archived run."


def _report_dir(out: Path) -> Path:
    """``out``, created with its parents when missing; a ``ReportError`` when it cannot be."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(f"cannot create the report directory {out}: {exc.strerror or exc}; {_ELSEWHERE}") from None
    return out


@dataclass
class _Writer:
    """Writes report files under ``out``, each atomically, and records the paths written in order."""

    out: Path
    written: list[Path] = field(default_factory=list)

    def __call__(self, name: str, content: str | bytes) -> None:
        """Write ``content`` to ``out/name`` (never over a run's own files, never half a file)."""
        path = self.out / name
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.written.append(atomic_write(path, content))
        except PermissionError as exc:
            raise ReportError(f"cannot write {path}: {exc.strerror or exc}; {_ELSEWHERE}") from None


def write_files(out: Path, files: Mapping[str, str | bytes]) -> tuple[Path, ...]:
    """Write each of ``files`` (name -> content) into the report folder ``out`` (made when missing) as the report
    writes its own: each file whole or not at all, never over a run's own files; the paths written, in order."""
    write = _Writer(_report_dir(out))
    for name, content in files.items():
        write(name, content)
    return tuple(write.written)


def _figures(data: ReportData, wanted: set[str], write: _Writer) -> tuple[list[Any], list[FigureRef]]:
    """Draw the figures when a wanted format shows them, and write them as files for md and figures."""
    figures: list[Any] = []
    if wanted & {"md", "html", "figures"}:
        from ._figures import render_figures  # matplotlib only when a figure is drawn

        figures = render_figures(data)
    refs: list[FigureRef] = []
    if wanted & {"md", "figures"}:
        for f in figures:
            write(f"figures/{f.name}.png", f.png)
            write(f"figures/{f.name}.svg", f.svg)
            refs.append(FigureRef(f.name, f.title, f.caption, f"figures/{f.name}.png"))
    return figures, refs


def _write_formats(
    data: ReportData, wanted: set[str], figures: Sequence[Any], refs: Sequence[FigureRef], write: _Writer
) -> None:
    """Write the wanted text formats: report.md, the CSV tables, tables.tex, report.json, report.html."""
    if "md" in wanted:
        write("report.md", markdown_report(data, refs))
    if "csv" in wanted:
        for name, text in csv_files(data).items():
            write(name, text)
    if "latex" in wanted:
        write("tables.tex", latex_tables(data))
    if "json" in wanted:
        write("report.json", json.dumps(data.to_dict(), indent=1, ensure_ascii=False, allow_nan=False) + "\n")
    if "html" in wanted:
        from ._html import html_report

        write("report.html", html_report(data, figures))
