"""Handlers of ``promptgrid translate``, ``check-translations`` and ``check-translation``.

The arguments are declared in ``promptgrid.matrix.cli``. Datasets live above
this package, so the handlers import ``promptgrid.matrix.datasets`` lazily,
only when descriptions are asked for.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, TextIO

from tabulate import tabulate

from promptgrid.display import escape_controls
from promptgrid.errors import TranslationError
from promptgrid.languages import language_problem
from promptgrid.safeio import JSONLine, read_json_lines
from promptgrid.translate._backends import make_backend
from promptgrid.translate._catalogs import TranslationCatalog
from promptgrid.translate._check import check_translation
from promptgrid.translate._pipeline import translate_units
from promptgrid.translate._store import TranslationStore
from promptgrid.translate._units import Unit, description_units, instruction_units
from promptgrid.translate._verify import Finding

__all__ = ["cmd_check_conversation_translations", "cmd_check_translation", "cmd_check_translations", "cmd_translate",
           "cmd_translate_conversations"]



def _languages(values: Iterable[str]) -> list[str]:
    from promptgrid.matrix.api import target_languages

    return target_languages(values)


def _units(what: str, dataset: str | None, bfcl_data: str | None, *, include_bfcl: bool) -> list[Unit]:
    units: list[Unit] = []
    if what in ("instructions", "all"):
        units.extend(instruction_units(include_bfcl=include_bfcl, bfcl_data=bfcl_data))
    if what in ("descriptions", "all"):
        from promptgrid.matrix.api import _dataset_functions  # a conversation dataset's docs too

        units.extend(description_units(_dataset_functions(dataset or "mini", bfcl_data)))
    return units


def _say(line: str) -> None:
    """A backend's retry note (already one redacted line), on stderr."""
    print(f"promptgrid: {escape_controls(line)}", file=sys.stderr, flush=True)


def cmd_translate(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    if getattr(args, "conversations_out", None):
        return cmd_translate_conversations(args, out)
    targets = _languages([args.to])
    if not targets:
        raise TranslationError("--to needs at least one language code, e.g. --to de,ja")
    backend = make_backend(args.backend, region=args.region, formality=args.formality,
                           timeout=getattr(args, "timeout", None), on_retry=_say)
    # bfcl-eval's own wording (experimental_bfcl) is read from an installed bfcl-eval and is
    # never copied into shipped catalogs, so only machine backends are asked for it.
    units = _units(args.what, args.dataset, getattr(args, "bfcl_data", None),
                   include_bfcl=bool(getattr(backend, "masks", True)))
    def progress(target: str) -> None:
        print(f"promptgrid: {target}: finished", file=sys.stderr, flush=True)

    with TranslationStore(args.store) as store:
        report = translate_units(units, targets, backend, store, progress=progress)
    summary = report.summary()
    rows = [[s.language, s.units, s.translated, s.from_catalog, s.stored, s.missing, s.failed] for s in summary]
    print(tabulate(rows, headers=["language", "units", "translated", "from catalog", "already stored", "missing",
                                  "failed checks"], tablefmt="simple"), file=out)
    print(f"\nbackend {report.backend}: {sum(s.translated for s in summary)} unit(s) translated "
          f"({len(report.sent)} unique string(s) sent), {sum(s.from_catalog for s in summary)} taken from catalogs, "
          f"{sum(s.stored for s in summary)} already stored; store {store.path}", file=out)
    failed = report.failed
    if failed:
        print("\nFailed checks (stored, flagged, not used for rendering):", file=out)
        rows = [[r.target, r.unit.key, ", ".join(r.problems)] for r in failed]
        print(tabulate(rows, headers=["language", "key", "problems"], tablefmt="simple"), file=out)
    missing = report.missing
    if missing:
        print(f"\n{len(missing)} unit(s) have no translation in the catalogs, e.g. "
              f"{missing[0].target}:{missing[0].unit.key}", file=out)
    return 1 if failed or missing else 0


def cmd_check_translations(args: argparse.Namespace, out: TextIO | None = None,
                           catalogs: Sequence[TranslationCatalog] | None = None) -> int:
    """``promptgrid check-translations``: ``promptgrid.check_translations`` printed; 1 when any failed."""
    from promptgrid.matrix.api import check_translations

    out = out or sys.stdout
    if getattr(args, "dataset", None):
        return cmd_check_conversation_translations(args, out)
    checks = check_translations(args.lang or None, store=args.store, back_translate=args.back_translate,
                                bfcl_data=getattr(args, "bfcl_data", None), catalogs=catalogs, on_retry=_say)
    for line in checks.skipped:
        print(f"promptgrid: warning: {escape_controls(line)}", file=sys.stderr)
    _print_findings(checks.findings, out)
    return 0 if checks.ok else 1


def _print_findings(findings: list[Finding], out: TextIO) -> None:
    if not findings:
        print("no translations to check", file=out)
        return
    groups: dict[tuple[str, str, str], list[Finding]] = {}
    for f in findings:
        origin = f.origin.split(":", 1)[0] if not f.origin.startswith("store:") else f.origin
        groups.setdefault((f.language, f.kind, origin), []).append(f)
    rows = [[lang, kind, origin, len(fs), sum(f.ok for f in fs), sum(not f.ok for f in fs)]
            for (lang, kind, origin), fs in sorted(groups.items())]
    print(tabulate(rows, headers=["language", "kind", "source", "units", "ok", "problems"], tablefmt="simple"),
          file=out)
    failures = [f for f in findings if not f.ok]
    if failures:
        print(f"\n{len(failures)} translation(s) failed:", file=out)
        rows = [[f.language, f.key, ", ".join(f.problems), f.origin, f.detail[:120]] for f in failures]
        print(tabulate(rows, headers=["language", "key", "problems", "where", "detail"], tablefmt="simple"),
              file=out)


_FIELDS = {"source": str, "translation": str, "target_lang": str}


def cmd_check_translation(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    path = args.jsonl
    try:
        handle = sys.stdin.buffer if path == "-" else Path(path).open("rb")
    except OSError as exc:
        raise TranslationError(f"cannot read {path}: {exc.strerror or exc}") from exc
    failures = 0
    with handle:
        for line in read_json_lines(handle):
            record, error = _parse_line(line)
            if error:
                print(f"{path}:{line.number}: {error}", file=sys.stderr)
                failures += 1
                continue
            assert record is not None
            result = check_translation(record["source"], record["translation"],
                                       record.get("source_lang") or "en", record["target_lang"],
                                       record.get("protected") or ())
            record["ok"] = result.ok
            record["problems"] = [p.value for p in result.problems]
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            failures += not result.ok
    return 1 if failures else 0


def _parse_line(line: JSONLine) -> tuple[dict[str, Any] | None, str | None]:
    if line.error is not None:
        return None, line.error
    record = line.value
    if not isinstance(record, dict):
        return None, "each line must be a JSON object with source, translation, source_lang, target_lang"
    for name, kind in _FIELDS.items():
        if not isinstance(record.get(name), kind):
            return None, f"field {name!r} is missing or not a string"
    if "source_lang" in record and not isinstance(record["source_lang"], str):
        return None, "field 'source_lang' must be a string"
    for name in ("source_lang", "target_lang"):
        problem = language_problem(record[name]) if name in record else None
        if problem:
            return None, f"field {name!r} {problem}"
    protected = record.get("protected")
    if protected is not None and (not isinstance(protected, list) or not all(isinstance(p, str) for p in protected)):
        return None, "field 'protected' must be a list of strings"
    return record, None


# --------------------------------------------------------------------------- conversations

def _print_conversation_findings(findings: Sequence[Any], counts: dict[str, int], out: TextIO) -> None:
    """Per language: conversations checked and findings; then one row per finding."""
    rows = [[lang, n, sum(f.language == lang for f in findings)] for lang, n in counts.items()]
    print(tabulate(rows, headers=["language", "conversations", "problems"], tablefmt="simple"), file=out)
    if findings:
        print(f"\n{len(findings)} problem(s):", file=out)
        rows = [[f.language, escape_controls(f.conversation_id), "" if f.turn is None else f.turn, f.code,
                 escape_controls(f.message)[:160]] for f in findings]
        print(tabulate(rows, headers=["language", "conversation", "turn", "code", "message"], tablefmt="simple"),
              file=out)


def cmd_translate_conversations(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """``promptgrid translate --dataset CONVERSATIONS --conversations-out FILE``: ``pg.translate_conversations``
    printed; exit 1 when any problem was found."""
    from promptgrid.matrix.api import translate_conversations

    out = out or sys.stdout
    if not args.dataset:
        raise TranslationError("--conversations-out needs --dataset with conversations: bfcl:multi_turn_base, "
                               "jsonl:PATH or mini-mt")

    def progress(target: str) -> None:
        print(f"promptgrid: {target}: finished", file=sys.stderr, flush=True)

    made = translate_conversations(args.dataset, [args.to], args.backend, out=args.conversations_out,
                                   what=args.what, store=args.store, bfcl_data=getattr(args, "bfcl_data", None),
                                   region=args.region, formality=args.formality,
                                   timeout=getattr(args, "timeout", None), on_retry=_say, progress=progress)
    _print_conversation_findings(list(made.findings), dict(made.languages), out)
    kept = f"; store {made.store}" if made.store is not None else ""
    print(f"\nbackend {made.backend}: {made.sent} segment(s) sent, {made.stored} taken from the store{kept}",
          file=out)
    print(f"{len(made.conversations)} conversation(s) written to {made.path} (run them with --dataset "
          f"jsonl:{made.path})", file=out)
    return 0 if made.ok else 1


def cmd_check_conversation_translations(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """``promptgrid check-translations --dataset DS [--dataset DS2] [--lang L] [--back-translate B]``:
    ``pg.check_conversation_translations`` printed; exit 0 when there is no problem, 1 otherwise."""
    from promptgrid.matrix.api import check_conversation_translations

    out = out or sys.stdout
    checks = check_conversation_translations(args.dataset, args.lang or None, back_translate=args.back_translate,
                                             bfcl_data=getattr(args, "bfcl_data", None), on_retry=_say)
    _print_conversation_findings(checks.failures, dict(checks.conversations), out)
    return 0 if checks.ok else 1
