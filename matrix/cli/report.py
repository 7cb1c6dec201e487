"""Handlers of ``promptgrid report`` and ``promptgrid compare``.

RUN_DIR is a run directory (read-only) or, for convenience, a JSONL file
written by ``promptgrid export``: ``promptgrid.report`` and
``promptgrid.load_results`` read either.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from promptgrid.matrix.api import load_results, report
from promptgrid.matrix.report import compare_runs

__all__ = ["cmd_compare", "cmd_report"]


def cmd_report(args: argparse.Namespace) -> int:
    from promptgrid.matrix.conversations import is_conversation_run

    run_dir = Path(args.run_dir)
    if is_conversation_run(run_dir):
        return conversation_report_cli(run_dir, args)
    if getattr(args, "episode", None) or getattr(args, "transcripts", None) is not None:
        from promptgrid.errors import ReportError

        raise ReportError("--episode and --transcripts are for conversation runs (their conversations.html); "
                          f"{args.run_dir} is a single-turn run.")
    if args.format is None and args.out is None:
        formats: set[str] = set()
    else:
        formats = {args.format or "all"}
    default_out = (
        Path(args.run_dir).parent / "report" if Path(args.run_dir).is_file() else Path(args.run_dir) / "report"
    )
    out = Path(args.out) if args.out else default_out
    result = report(args.run_dir, out if formats else None, formats=formats, baseline=args.baseline)
    sys.stdout.write(result.console)
    if result.files:
        print(f"\nwrote {len(result.files)} file(s) to {out}", file=sys.stderr)
        html = out / "report.html"
        if html in result.files:
            print(f"open {html}", file=sys.stderr)
    return 0


def conversation_report_cli(run_dir: Path, args: argparse.Namespace) -> int:
    """``promptgrid report DIR`` of a conversation run: the console summary; ``--format md|json|html|all`` (or
    ``--out``, which means all) also writes ``conversations.md``, ``conversations.json`` and ``conversations.html``
    (the page: figures, the tables, transcripts of chosen episodes, ``--episode``/``--transcripts``). Other
    formats are single-turn only."""
    import json

    from promptgrid.errors import OutputError, ReportError
    from promptgrid.matrix.conversations import open_conversation_run
    from promptgrid.matrix.conversations._report import conversation_report

    fmt = args.format
    if fmt not in (None, "all", "md", "json", "html"):
        raise ReportError(f"a conversation run's report is written as md, json or html, not {fmt}: use --format md, "
                          "json, html or all.")
    wanted, limit = getattr(args, "episode", None), getattr(args, "transcripts", None)
    html = fmt in ("all", "html") or (fmt is None and args.out is not None)
    if (wanted or limit is not None) and not html:
        raise ReportError("--episode and --transcripts choose the transcripts of conversations.html: add --format "
                          "html (or all).")
    run = open_conversation_run(run_dir)
    episodes, variants = run.episodes(), run.variants()  # read once for both reports (as run.report() reads them)
    report = conversation_report(episodes, variants, labels=run.labels())
    sys.stdout.write(report.console())
    languages = None  # the per-language section, when the run has more than one language
    if len({e.language for e in episodes}) > 1:
        from promptgrid.matrix.conversations._languages import language_report

        languages = language_report(episodes, variants)
        sys.stdout.write(languages.console())
    if fmt is None and args.out is None:
        return 0
    out = Path(args.out) if args.out else run_dir / "report"
    if out.exists() and not out.is_dir():
        raise OutputError(f"--out {out} is a file; give a directory for the conversations.* files.")
    texts = {}
    if fmt in (None, "all", "md"):
        texts["conversations.md"] = report.to_markdown() + ("" if languages is None else
                                                            "\n" + languages.to_markdown())
    if fmt in (None, "all", "json"):
        data = report.to_dict()
        data["languages"] = None if languages is None else languages.to_dict()
        texts["conversations.json"] = json.dumps(data, indent=2, allow_nan=False) + "\n"
    if html:  # built before anything is written: a bad --episode writes nothing
        from promptgrid.matrix.conversations._html import conversation_run_html
        from promptgrid.matrix.conversations._transcript import MAX_TRANSCRIPTS

        texts["conversations.html"] = conversation_run_html(
            run_dir, report=report, languages=languages, results=episodes, transcripts=wanted,
            max_transcripts=MAX_TRANSCRIPTS if limit is None else limit)
    _write_report_files(out, texts)
    return 0


def _write_report_files(out: Path, texts: dict[str, str]) -> None:
    """Write each of ``texts`` (file name -> text) into the folder ``out`` (made when missing), each file whole or
    not at all (``OutputError``); say what was written."""
    from promptgrid.errors import OutputError
    from promptgrid.safeio import atomic_output

    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create {out}: {exc.strerror or exc}") from None
    written = []
    for name, text in texts.items():
        with atomic_output(out / name) as fh:  # a file that cannot be written is an OutputError, nothing half-done
            fh.write(text)
        written.append(out / name)
    print(f"\nwrote {', '.join(str(p) for p in written)}", file=sys.stderr)
    if out / "conversations.html" in written:
        print(f"open {out / 'conversations.html'}", file=sys.stderr)


def _run_name(source: str, default: str) -> str:
    p = Path(source)
    return (p.stem if p.is_file() else p.resolve().name) or default


def cmd_compare(args: argparse.Namespace) -> int:
    rows_a, rows_b = load_results(args.run_a), load_results(args.run_b)
    names = (_run_name(args.run_a, "A"), _run_name(args.run_b, "B"))
    if names[0] == names[1]:
        names = (f"A:{names[0]}", f"B:{names[1]}")
    result = compare_runs(rows_a, rows_b, Path(args.out) if args.out else None, names=names)
    sys.stdout.write(result.console)
    if result.files:
        print(f"\nwrote {len(result.files)} file(s) to {args.out}", file=sys.stderr)
    return 0
