"""Handlers of ``promptgrid translate``, ``check-translations`` and ``check-translation``.

The arguments are declared in ``promptgrid.matrix.cli``. Datasets live above
this package, so the handlers import ``promptgrid.matrix.datasets`` lazily,
only when descriptions are asked for.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from tabulate import tabulate

from promptgrid.display import escape_controls
from promptgrid.errors import PromptgridError, TranslationError
from promptgrid.languages import language_problem
from promptgrid.safeio import JSONLine, read_json_lines
from promptgrid.translate import _backends
from promptgrid.translate._errors import TranslationInputError
from promptgrid.translate._store import TranslationStore
from promptgrid.translate._units import Unit, description_units, instruction_units

if TYPE_CHECKING:
    from promptgrid.translate._backends import TranslationBackend
    from promptgrid.translate._catalogs import TranslationCatalog
    from promptgrid.translate._verify import Finding

__all__ = ["cmd_check_conversation_translations", "cmd_check_translation", "cmd_check_translations", "cmd_translate",
           "cmd_translate_conversations"]



class _Watched:
    """A backend whose own failures (exit 1) are told apart from errors in what the caller gave (``_input``)."""

    def __init__(self, backend: TranslationBackend) -> None:
        self.backend = backend
        self.failures: list[BaseException] = []

    @property
    def name(self) -> str:
        return self.backend.name

    def __getattr__(self, attribute: str) -> Any:  # masks, covers, lookup, describe, close, ...
        return getattr(self.backend, attribute)

    def translate(self, texts: list[str], source: str, target: str) -> list[str]:
        try:
            return self.backend.translate(texts, source, target)
        except TranslationError as exc:
            self.failures.append(exc)
            raise


@contextlib.contextmanager
def _input(backend: _Watched | None = None) -> Iterator[None]:
    """What the caller gave: a ``TranslationError`` here that ``backend`` did not raise is bad input
    (``TranslationInputError``, exit 2), as every command exits on bad input; a backend's failure stays exit 1."""
    try:
        yield
    except TranslationError as exc:
        if exc.exit_code == 2 or (backend is not None and any(exc is f for f in backend.failures)):
            raise
        raise TranslationInputError(str(exc)) from None


@contextlib.contextmanager
def _nothing_left(store: str | None) -> Iterator[None]:
    """A store this command created and left empty is removed when the command ends on bad input found late (a
    key or model the provider refused at its first request): bad input leaves nothing behind."""
    from promptgrid.translate._store import default_store_path

    path = Path(store).expanduser() if store else default_store_path()
    existed = path.exists()
    try:
        yield
    except PromptgridError as exc:
        if exc.exit_code == 2 and not existed and path.is_file():
            _remove_if_empty(path)
        raise


def _remove_if_empty(path: Path) -> None:
    try:
        with TranslationStore(path, readonly=True) as store:
            empty = len(store) == 0
    except PromptgridError:
        return
    if empty:
        for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            with contextlib.suppress(OSError):
                leftover.unlink()


def make_backend(spec: str, **options: Any) -> TranslationBackend:
    """``promptgrid.translate._backends.make_backend``, looked up when a command makes its backend."""
    return _backends.make_backend(spec, **options)


def _make_clients(name: str, **options: Any) -> Any:
    """The run's client for a model (``promptgrid.matrix.clients.make_client``), imported when one is made."""
    from promptgrid.matrix.clients import make_client

    return make_client(name, **options)


def _backend(args: argparse.Namespace, spec: str) -> _Watched:
    """The backend ``spec`` names, with the command's --api-base, --api-key-env, --timeout, --region and
    --formality (bad input: ``TranslationInputError``)."""
    with _input():
        return _Watched(make_backend(spec, region=getattr(args, "region", None),
                                     formality=getattr(args, "formality", None), timeout=getattr(args, "timeout", None),
                                     on_retry=_say, api_base=getattr(args, "api_base", None) or None,
                                     api_key_env=getattr(args, "api_key_env", None), clients=_make_clients))


def _no_endpoint_without_backend(args: argparse.Namespace, backend: str | None, flag: str) -> None:
    if (getattr(args, "api_base", None) or getattr(args, "api_key_env", None)) and not backend:
        raise TranslationInputError(f"--api-base and --api-key-env are the server of {flag} llm:MODEL; give "
                                    f"{flag} too")


def _close(backend: object) -> None:
    close = getattr(backend, "close", None)
    if callable(close):
        close()


def _languages(values: Iterable[str]) -> list[str]:
    from promptgrid.matrix.api import target_languages

    with _input():
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


def _progress(target: str) -> None:
    print(f"promptgrid: {target}: finished", file=sys.stderr, flush=True)


def cmd_translate(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    if getattr(args, "conversations_out", None):
        return cmd_translate_conversations(args, out)
    targets = _languages([args.to])
    if not targets:
        raise TranslationInputError("--to needs at least one language code, e.g. --to de,ja")
    backend = _backend(args, args.backend)
    try:
        with _input(backend):
            # bfcl-eval's own wording (experimental_bfcl) is read from an installed bfcl-eval and is
            # never copied into shipped catalogs, so only machine backends are asked for it.
            units = _units(args.what, args.dataset, getattr(args, "bfcl_data", None),
                           include_bfcl=bool(getattr(backend, "masks", True)))
            _require_coverage(backend, targets)
        with _nothing_left(args.store), _input(backend), TranslationStore(args.store) as store:
            from promptgrid.translate._pipeline import translate_units

            report = translate_units(units, targets, backend, store, progress=_progress)
    finally:
        _close(backend)
    summary = report.summary()
    rows = [[s.language, s.units, s.translated, s.from_catalog, s.stored, s.missing, s.failed] for s in summary]
    print(tabulate(rows, headers=["language", "units", "translated", "from catalog", "already stored", "missing",
                                  "failed checks"], tablefmt="simple"), file=out)
    translated, from_catalog = sum(s.translated for s in summary), sum(s.from_catalog for s in summary)
    stored = sum(s.stored for s in summary)
    if getattr(backend, "masks", True):
        print(f"\nbackend {report.backend}: {translated} unit(s) translated ({len(report.sent)} unique string(s) "
              f"sent), {stored} already stored; store {store.path}", file=out)
    else:
        print(f"\n{from_catalog} unit(s) taken from {_catalogs_of(backend)}, {stored} already stored; "
              f"store {store.path}", file=out)
    failed = report.failed
    if failed:
        print("\nFailed checks (stored, flagged, not used for rendering):", file=out)
        rows = [[r.target, r.unit.key, ", ".join(r.problems)] for r in failed]
        print(tabulate(rows, headers=["language", "key", "problems"], tablefmt="simple"), file=out)
    missing = report.missing
    if missing:
        print(f"\n{len(missing)} unit(s) have no translation in {_catalogs_of(backend)}, e.g. "
              f"{missing[0].target}:{missing[0].unit.key}", file=out)
    return 1 if failed or missing else 0


def _require_coverage(backend: object, targets: Sequence[str]) -> None:
    from promptgrid.translate._pipeline import _require_coverage as require

    require(backend, targets)  # type: ignore[arg-type]


def _catalogs_of(backend: object) -> str:
    """The catalogs a catalog backend reads, for messages (``the shipped catalogs``, ``the catalog file(s) X``)."""
    describe = getattr(backend, "describe", None)
    return str(describe()) if callable(describe) else f"the {getattr(backend, 'name', 'catalog')} catalogs"


def cmd_check_translations(args: argparse.Namespace, out: TextIO | None = None,
                           catalogs: Sequence[TranslationCatalog] | None = None) -> int:
    """``promptgrid check-translations``: ``promptgrid.check_translations`` printed; 1 when any failed."""
    out = out or sys.stdout
    if getattr(args, "dataset", None):
        return cmd_check_conversation_translations(args, out)
    from promptgrid.matrix.api import check_translations

    languages = _languages(args.lang) if args.lang else None
    if args.store is not None and not Path(args.store).expanduser().is_file():
        raise TranslationInputError(f"translation store {args.store} does not exist; give the --store that "
                                    "promptgrid translate wrote, or leave --store out to check the default one")
    _no_endpoint_without_backend(args, args.back_translate, "--back-translate")
    back = _backend(args, args.back_translate) if args.back_translate else None
    try:
        with _input(back):
            checks = check_translations(languages, store=args.store, back_translate=back,  # type: ignore[arg-type]
                                        bfcl_data=getattr(args, "bfcl_data", None), catalogs=catalogs,
                                        on_retry=_say)
    finally:
        _close(back)
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
        raise TranslationInputError(f"cannot read {path}: {exc.strerror or exc}") from exc
    from promptgrid.translate._check import check_translation

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
        raise TranslationInputError("--conversations-out needs --dataset with conversations: bfcl:multi_turn_base, "
                                    "jsonl:PATH or mini-mt")
    targets = _languages([args.to])
    if not targets:
        raise TranslationInputError("--to needs at least one language code, e.g. --to de,ja")
    from promptgrid.matrix.datasets._conversations import dataset_files
    from promptgrid.safeio import check_output

    # An output that is an input, a run's store or a folder: refused before a backend is even made.
    check_output(Path(args.conversations_out).expanduser(), inputs=dataset_files(args.dataset))
    backend = _backend(args, args.backend)
    try:
        with _nothing_left(args.store if getattr(backend, "masks", True) else None), _input(backend):
            made = translate_conversations(args.dataset, targets, backend, out=args.conversations_out,
                                           what=args.what, store=args.store,
                                           bfcl_data=getattr(args, "bfcl_data", None), on_retry=_say,
                                           progress=_progress)
    finally:
        _close(backend)
    _print_conversation_findings(list(made.findings), dict(made.languages), out)
    kept = f"; store {made.store}" if made.store is not None else ""
    if getattr(backend, "masks", True):
        print(f"\nbackend {made.backend}: {made.sent} segment(s) sent, {made.stored} taken from the store{kept}",
              file=out)
    else:
        print(f"\n{made.sent} segment(s) taken from {_catalogs_of(backend)}{kept}", file=out)
    print(f"{len(made.conversations)} conversation(s) written to {made.path} (run them with --dataset "
          f"jsonl:{made.path})", file=out)
    return 0 if made.ok else 1


def cmd_check_conversation_translations(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """``promptgrid check-translations --dataset DS [--dataset DS2] [--lang L] [--back-translate B]``:
    ``pg.check_conversation_translations`` printed; exit 0 when there is no problem, 1 otherwise."""
    from promptgrid.matrix.api import check_conversation_translations

    out = out or sys.stdout
    languages = _languages(args.lang) if args.lang else None
    _no_endpoint_without_backend(args, args.back_translate, "--back-translate")
    back = _backend(args, args.back_translate) if args.back_translate else None
    try:
        with _input(back):
            checks = check_conversation_translations(args.dataset, languages, back_translate=back,
                                                     bfcl_data=getattr(args, "bfcl_data", None), on_retry=_say)
    finally:
        _close(back)
    _print_conversation_findings(checks.failures, dict(checks.conversations), out)
    return 0 if checks.ok else 1
