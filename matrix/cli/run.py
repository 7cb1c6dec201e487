"""``promptgrid run``, ``score`` and ``export``: build a run from flags or a config file, run it, show it.

``run`` is resumable by design: the same command again sends only the calls
that have no result yet (it says so when there is nothing left to send).
Exit codes: 0 done (failed calls are data, not a failed command), 1 a
model was stopped by an error every call would repeat (bad key, unknown
model), 2 bad input, 3 stopped by ``--max-cost``, 130 interrupted.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import json
import os
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TextIO

from promptgrid.records import Case
from promptgrid.variants import Variant, load_grid

from promptgrid.matrix.running.config import DEFAULT_CONCURRENCY, ModelSpec, RunConfig, RunError, default_run_dir, load_run_config, model_params
from promptgrid.matrix.running.results import ResultRow, dump_results, write_results
from promptgrid.matrix.running.store import STORE_FILE, RunLock, RunStore, case_from_dict

__all__ = [
    "EXIT_MAX_COST",
    "Prepared",
    "accuracy_table",
    "build_config",
    "cmd_export",
    "cmd_run",
    "cmd_score",
    "dry_run",
    "execute",
    "prepare",
    "rescore",
]

EXIT_MAX_COST = 3
EXIT_HALTED = 1
EXIT_INTERRUPTED = 130
RUN_JSON = "run.json"
_MAX_INVOCATIONS = 50


# --------------------------------------------------------------------------- config


def _is_run_config(ref: str) -> bool:
    """A YAML with ``models`` or ``dataset`` at the top is a run config; anything else is a grid."""
    if not ref.endswith((".yaml", ".yml")) or not Path(ref).is_file():
        return False
    import yaml

    try:
        data = yaml.safe_load(Path(ref).read_text(encoding="utf-8"))
    except yaml.YAMLError:
        return False  # let the grid loader report it with its line
    return isinstance(data, dict) and ("models" in data or "dataset" in data)


def _default_concurrency(name: str) -> int:
    # One llama context generates one answer at a time; more workers would only queue.
    return 1 if name.startswith("local/") else DEFAULT_CONCURRENCY


def build_config(args: argparse.Namespace) -> RunConfig:
    """Merge a run config file (if ``args.grid`` is one) with the command-line flags (flags win)."""
    base: dict[str, Any] = load_run_config(args.grid) if _is_run_config(args.grid) else {"grid": args.grid}
    if getattr(args, "dataset", None):
        base["dataset"] = args.dataset
    if "dataset" not in base:
        raise RunError("no dataset: give --dataset (mini, bfcl:simple_python, jsonl:PATH, ...) "
                       "or name one in the run config.")
    for flag, key in (("bfcl_data", "bfcl_data"), ("run_dir", "run_dir"), ("limit", "limit"),
                      ("repeats", "repeats"), ("max_retries", "max_retries"), ("max_cost", "max_cost"),
                      ("store", "translation_store")):
        value = getattr(args, flag, None)
        if value is not None:
            base[key] = value
    if getattr(args, "case", None):
        base["cases"] = tuple(args.case)
    if getattr(args, "variant", None):
        base["variants"] = tuple(args.variant)
    repeats = int(base.get("repeats", 1))
    if repeats < 1:
        raise RunError(f"--repeats must be >= 1, got {repeats}.")
    if base.get("limit") is not None and int(base["limit"]) < 1:
        raise RunError(f"--limit must be >= 1, got {base['limit']}.")
    if base.get("max_cost") is not None and float(base["max_cost"]) <= 0:
        raise RunError(f"--max-cost must be > 0 USD, got {base['max_cost']}.")
    if base.get("max_retries") is not None and int(base["max_retries"]) < 0:
        raise RunError(f"--max-retries must be >= 0, got {base['max_retries']}.")

    if getattr(args, "model", None):
        models = [{"name": m, **({"api_base": args.api_base} if args.api_base else {})} for m in args.model]
    elif base.get("models"):
        models = [dict(m) for m in base["models"]]
        if getattr(args, "api_base", None):
            for m in models:
                m["api_base"] = args.api_base
    else:
        raise RunError("no model: give --model (e.g. openai/gpt-4o-mini, local/smollm2-135m) "
                       "or list models in the run config.")
    specs = []
    for m in models:
        params = dict(m.get("params") or {})
        for flag in ("temperature", "max_tokens", "seed"):
            value = getattr(args, flag, None)
            if value is not None:
                params[flag] = value
        if params.get("max_tokens") is not None and int(params["max_tokens"]) < 1:
            raise RunError(f"--max-tokens must be >= 1, got {params['max_tokens']}.")
        spec: dict[str, Any] = {"name": m["name"], "params": model_params(params, repeats),
                                "api_base": m.get("api_base"), "api_key_env": m.get("api_key_env"),
                                "concurrency": m.get("concurrency") or _default_concurrency(m["name"])}
        for key in ("rpm", "tpm", "timeout"):
            if m.get(key) is not None:
                spec[key] = float(m[key])
        for flag in ("concurrency", "rpm", "tpm", "timeout"):
            value = getattr(args, flag, None)
            if value is not None:
                if value <= 0:
                    raise RunError(f"--{flag} must be > 0, got {value}.")
                spec[flag] = int(value) if flag == "concurrency" else float(value)
        specs.append(ModelSpec(**spec))
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise RunError(f"a model is named twice: {', '.join(names)}.")
    run_dir = Path(base["run_dir"]) if base.get("run_dir") else default_run_dir(base["grid"], base["dataset"])
    fields = {k: base[k] for k in ("bfcl_data", "limit", "cases", "variants", "translation_store", "max_cost",
                                   "max_retries") if base.get(k) is not None}
    return RunConfig(grid=base["grid"], dataset=base["dataset"], models=tuple(specs), run_dir=run_dir,
                     repeats=repeats, **fields)


# --------------------------------------------------------------------------- preparation


class Prepared:
    """A config resolved into variants, cases and a renderer (no model touched yet)."""

    def __init__(self, config: RunConfig, grid_name: str, variants: list[Variant], cases: list[Case],
                 renderer: Any) -> None:
        self.config = config
        self.grid_name = grid_name
        self.variants = variants
        self.cases = cases
        self.renderer = renderer

    @property
    def jobs(self) -> int:
        return len(self.variants) * len(self.cases) * self.config.repeats * len(self.config.models)


def prepare(config: RunConfig) -> Prepared:
    """Load the grid and dataset, select variants and cases, build the renderer."""
    from promptgrid.matrix.datasets import load_dataset
    from promptgrid.templates import Renderer

    from promptgrid.matrix.cli.inspect import localization, select_variants

    grid = load_grid(config.grid)
    variants = list(select_variants(grid, list(config.variants)))
    dataset = load_dataset(config.dataset, bfcl_data=config.bfcl_data)
    selected = dataset.select(case_ids=list(config.cases) if config.cases else None, limit=config.limit)
    cases = list(selected.cases)
    if not cases:
        raise RunError(f"dataset {config.dataset!r} selects no cases; check --case / --limit.")
    renderer = Renderer(grid.template_dir, localization(config.translation_store), bfcl_data=config.bfcl_data)
    # Pre-flight: every variant once, so a template or catalog error stops the run before any call.
    for variant in variants:
        renderer.render(variant, cases[0])
    return Prepared(config, grid.name, variants, cases, renderer)


def _clients(config: RunConfig, redactor: Any) -> dict[str, Any]:
    from promptgrid.matrix.clients import make_client

    out = {}
    for spec in config.models:
        if spec.api_key_env and not os.environ.get(spec.api_key_env):
            raise RunError(f"model {spec.name}: api_key_env {spec.api_key_env} is not set in the environment. "
                           f"Export it first: export {spec.api_key_env}=...")
        out[spec.name] = make_client(spec.name, api_base=spec.api_base, api_key_env=spec.api_key_env,
                                     redactor=redactor)
        load = getattr(out[spec.name], "load", None)
        if callable(load):
            load()  # a local model loads before the clock starts, and fails now if it cannot
    return out


# --------------------------------------------------------------------------- dry run


def dry_run(prep: Prepared, out: TextIO | None = None) -> dict[str, Any]:
    """Count jobs, stored results, shared prompts, tokens and cost; call nothing."""
    out = out or sys.stdout
    from promptgrid.matrix.running.plan import iter_jobs

    config = prep.config
    store_path = Path(config.run_dir) / STORE_FILE
    store = RunStore(config.run_dir) if store_path.exists() else None
    totals: dict[str, Any] = {"jobs": 0, "stored": 0, "shared": 0, "calls": 0, "input_tokens": 0,
                              "output_tokens_max": 0, "cost_input": 0.0, "cost_max": 0.0, "unpriced": []}
    lines = []
    try:
        for spec in config.models:
            client = _price_client(spec)
            seen: set[bytes] = set()
            jobs = stored = shared = calls = in_tok = 0
            batch: list[Any] = []

            def flush(batch: list[Any]) -> tuple[int, int, int, int]:
                st = store.lookup([j.key for j in batch]) if store is not None else {}
                s_stored = s_shared = s_calls = s_in = 0
                for j in batch:
                    digest = bytes.fromhex(j.key)[:16]
                    if j.key in st:
                        s_stored += 1
                    elif digest in seen:
                        s_shared += 1
                    else:
                        seen.add(digest)
                        s_calls += 1
                        s_in += sum(len(m["content"]) for m in j.messages) // 4 + 1
                return s_stored, s_shared, s_calls, s_in

            for job in iter_jobs(spec.name, spec.params, prep.variants, prep.cases, config.repeats, prep.renderer):
                jobs += 1
                batch.append(job)
                if len(batch) >= 500:
                    a, b, c, d = flush(batch)
                    stored, shared, calls, in_tok = stored + a, shared + b, calls + c, in_tok + d
                    batch = []
            if batch:
                a, b, c, d = flush(batch)
                stored, shared, calls, in_tok = stored + a, shared + b, calls + c, in_tok + d
            max_out = calls * int(spec.params.get("max_tokens") or 0)
            cost_in = client.price(in_tok, 0) if client is not None else None
            cost_max = client.price(in_tok, max_out) if client is not None else None
            if cost_in is None:
                totals["unpriced"].append(spec.name)
            totals["jobs"] += jobs
            totals["stored"] += stored
            totals["shared"] += shared
            totals["calls"] += calls
            totals["input_tokens"] += in_tok
            totals["output_tokens_max"] += max_out
            totals["cost_input"] += cost_in or 0.0
            totals["cost_max"] += cost_max or 0.0
            price = (f"${cost_in:.4f} input, up to ${cost_max:.4f} with max_tokens output"
                     if cost_in is not None and cost_max is not None else "price unknown")
            lines.append([spec.name, jobs, stored, shared, calls, in_tok, max_out, price])
    finally:
        if store is not None:
            store.close()
    from tabulate import tabulate

    c = config
    print(f"dry run: nothing is sent. {len(c.models)} model(s) x {len(prep.variants)} variants x "
          f"{len(prep.cases)} cases x {c.repeats} repeat(s) = {totals['jobs']} jobs; run directory {c.run_dir}",
          file=out)
    print(tabulate(lines, headers=["model", "jobs", "already stored", "shared prompt", "calls to send",
                                   "est. input tokens", "max output tokens", "est. cost"]), file=out)
    note = "input tokens are prompt characters / 4; cost from litellm's price list"
    if totals["unpriced"]:
        note += f"; no price known for {', '.join(totals['unpriced'])}"
    print(f"total: {totals['calls']} calls to send, est. ${totals['cost_input']:.4f} input + output, "
          f"at most ${totals['cost_max']:.4f} ({note}).", file=out)
    return totals


def _price_client(spec: ModelSpec) -> Any:
    from promptgrid.matrix.clients import provider_of

    provider = provider_of(spec.name)
    if provider != "litellm":
        class _Free:
            def price(self, i: int, o: int) -> float:
                return 0.0
        return _Free()
    from promptgrid.matrix.clients._litellm import LiteLLMClient

    return LiteLLMClient(spec.name, api_base=spec.api_base)


# --------------------------------------------------------------------------- run


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _write_run_json(run_dir: Path, config: RunConfig, prep: Prepared, invocation: dict[str, Any]) -> None:
    path = run_dir / RUN_JSON
    data: dict[str, Any] = {}
    if path.exists():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
    invocations = [i for i in data.get("invocations", []) if i.get("id") != invocation["id"]]
    invocations.append(invocation)
    from promptgrid.matrix.running import store as _store

    data = {
        "version": 1,
        "store_schema": _store.SCHEMA_VERSION,
        "config": config.to_dict(),
        "grid_name": prep.grid_name,
        "variants": len(prep.variants),
        "cases": len(prep.cases),
        "invocations": invocations[-_MAX_INVOCATIONS:],
    }
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def execute(prep: Prepared, *, progress: bool = True, retry_errors: bool = False, out: TextIO | None = None,
            err: TextIO | None = None, scorer: Any = None,
            clients: Mapping[str, Any] | None = None) -> tuple[int, Any]:
    """Run a prepared config: lock, store, calls, run.json, messages. Returns (exit code, RunSummary)."""
    out = out or sys.stdout
    err = err or sys.stderr
    from promptgrid.matrix.clients import Redactor
    from promptgrid.matrix.running.progress import Progress
    from promptgrid.matrix.running.runner import Runner, run_sync

    config = prep.config
    run_dir = Path(config.run_dir)
    redactor = Redactor()
    if scorer is None:
        from promptgrid.matrix.scoring import score as scorer
    with RunLock(run_dir):
        the_clients = dict(clients) if clients is not None else _clients(config, redactor)
        store = RunStore(run_dir, create=True)
        invocation = {"id": f"{time.time():.6f}-{os.getpid()}", "started": _now(), "finished": None,
                      "jobs": prep.jobs, "retry_errors": retry_errors}
        _write_run_json(run_dir, config, prep, invocation)
        try:
            _warm_up(scorer, prep)
            # Everything loaded so far (modules, cases, caches, the language-id model) lives until
            # the end: take it out of the cyclic GC's reach, so the collections that litellm's
            # many short-lived objects trigger do not rescan it on every call.
            gc.collect()
            gc.freeze()
            bar = Progress(prep.jobs, stream=err, enabled=progress)
            runner = Runner(config, variants=prep.variants, cases=prep.cases, renderer=prep.renderer,
                            clients=the_clients, store=store, scorer=scorer, progress=bar, redactor=redactor,
                            retry_errors=retry_errors)
            summary = run_sync(runner)
            counts = store.counts()
            invocation.update(finished=_now(), summary=summary.to_dict())
            _write_run_json(run_dir, config, prep, invocation)
            _report_run(summary, counts, store, config, out, err)
        finally:
            gc.unfreeze()
            store.close()
    if summary.stopped == "interrupted":
        return EXIT_INTERRUPTED, summary
    if summary.stopped == "max_cost":
        return EXIT_MAX_COST, summary
    if summary.halted:
        return EXIT_HALTED, summary
    return 0, summary


def _warm_up(scorer: Any, prep: Prepared) -> None:
    """Score one dummy answer first, so one-time loads (language-id model) happen before calls start."""
    try:
        scorer("I cannot help with that.", prep.variants[0], prep.cases[0])
    except Exception:  # noqa: BLE001 - a broken scorer is reported per response later
        pass


def _report_run(summary: Any, counts: Mapping[str, int], store: RunStore, config: RunConfig,
                out: TextIO, err: TextIO) -> None:
    s = summary
    if s.sent == 0 and s.stopped is None:
        print(f"nothing to send: all {s.jobs} jobs already have results in {config.run_dir} "
              "(no model calls made).", file=err)
    else:
        rate = f", {s.calls_per_s:.1f} calls/s" if s.exec_s > 0 else ""
        print(f"{s.sent} calls sent ({s.errors} ended in an error, {s.attempts} attempts{rate}); "
              f"{s.cached} jobs answered from the store, {s.shared} shared an identical prompt; "
              f"spent ${s.spend:.4f}.", file=err)
    if s.stopped == "interrupted":
        print(f"interrupted: every answer received is saved in {config.run_dir}. "
              "Run the same command again to resume.", file=err)
    elif s.stopped == "max_cost":
        print(f"stopped: the run directory's spend reached --max-cost ${config.max_cost:.4f} "
              f"(now ${store.spend():.4f}). Raise --max-cost and run the same command to continue.", file=err)
    for model, error in s.halted.items():
        print(f"model {model}: stopped after an error every call would repeat: {error}\n"
              f"  Its remaining jobs are left pending. Fix the key, model name or api_base and run the same "
              "command again with --retry-errors (to resend the calls that failed).", file=err)
    if counts.get("call_errors"):
        print(f"{counts['call_errors']} calls in this run directory ended in an error "
              f"({counts['transient_errors']} transient: rate limit, server, timeout, connection). "
              "They are not sent again by a plain re-run; add --retry-errors to retry them.", file=err)
    if s.score_failures:
        print(f"{s.score_failures} responses could not be scored (first: {s.score_error}); they are stored "
              f"unscored. Fix the checker and run: promptgrid score {config.run_dir}", file=err)
    table = accuracy_table(store.rows())
    if table:
        print(table, file=out)


# --------------------------------------------------------------------------- tables


def accuracy_table(rows: Iterable[ResultRow]) -> str:
    """Accuracy per variant (rows) x model (columns), counted from streamed rows.

    Uses ``promptgrid.matrix.report``'s table when that module offers one.
    """
    try:
        from promptgrid.matrix import report as _report

        fn = getattr(_report, "accuracy_table", None)
    except Exception:  # noqa: BLE001 - the report module is optional here; fall back to our table
        fn = None
    if fn is not None and fn is not accuracy_table:
        return str(fn(rows))
    from tabulate import tabulate

    counts: dict[tuple[str, str], list[int]] = {}
    labels: dict[str, str] = {}
    models: list[str] = []
    for r in rows:
        if r.status == "pending":
            continue
        key = (r.variant_id, r.model)
        c = counts.setdefault(key, [0, 0, 0])
        c[0] += 1
        c[1] += bool(r.valid)
        c[2] += r.error is not None
        labels.setdefault(r.variant_id, r.label or r.variant_id)
        if r.model not in models:
            models.append(r.model)
    if not counts:
        return ""
    body = []
    for vid, label in labels.items():
        line = [label]
        for m in models:
            c = counts.get((vid, m))
            if c is None:
                line.append("")
            else:
                err = f", {c[2]} err" if c[2] else ""
                line.append(f"{100 * c[1] / c[0]:.1f}% ({c[1]}/{c[0]}{err})")
        body.append(line)
    overall = ["all variants"]
    for m in models:
        n = sum(c[0] for (v, mm), c in counts.items() if mm == m)
        ok = sum(c[1] for (v, mm), c in counts.items() if mm == m)
        overall.append(f"{100 * ok / n:.1f}% ({ok}/{n})" if n else "")
    body.append(overall)
    return tabulate(body, headers=["variant", *models])


# --------------------------------------------------------------------------- score / export


def _stored_records(store: RunStore) -> tuple[dict[int, Variant], dict[int, Case]]:
    variants = {i: Variant(**dims) for i, (_vid, _label, dims) in store.variants().items()}
    cases = {i: case_from_dict(json.loads(row[4])) for i, row in store.cases().items()}
    return variants, cases


def rescore(run_dir: str | Path, *, scorer: Any = None, only_unscored: bool = False) -> dict[str, int]:
    """Score every stored response again (no model calls). Returns counts."""
    from promptgrid.matrix.running.runner import verdict_row

    if scorer is None:
        from promptgrid.matrix.scoring import score as scorer
    run_dir = Path(run_dir)
    if not (run_dir / STORE_FILE).exists():
        raise RunError(f"{run_dir} is not a run directory (no {STORE_FILE}).")
    stats = {"scored": 0, "changed": 0, "errors": 0, "failed": 0}
    with RunLock(run_dir), RunStore(run_dir) as store:
        variants, cases = _stored_records(store)
        old = {}
        for (m, v, c, r), valid in _valid_by_row(store):
            old[(m, v, c, r)] = valid
        batch: list[Any] = []
        for row, response, status in store.iter_scorable(only_unscored=only_unscored):
            if status != "done":
                batch.append((row, None, False, None))
                stats["errors"] += 1
            else:
                try:
                    vr = verdict_row(row, scorer(response or "", variants[row[1]], cases[row[2]]))
                except Exception:  # noqa: BLE001 - keep going; count it
                    stats["failed"] += 1
                    continue
                stats["scored"] += 1
                if old.get(row) is not None and bool(old[row]) != vr[2]:
                    stats["changed"] += 1
                batch.append(vr)
            if len(batch) >= 1000:
                store.set_verdicts(batch)
                batch = []
        store.set_verdicts(batch)
    return stats


def _valid_by_row(store: RunStore) -> Iterator[tuple[tuple[int, int, int, int], int | None]]:
    for m, v, c, r, valid in store.db.execute('SELECT model, variant, "case", repeat, valid FROM jobs'):
        yield (m, v, c, r), valid


def cmd_run(args: argparse.Namespace) -> int:
    config = build_config(args)
    prep = prepare(config)
    if args.dry_run:
        dry_run(prep)
        return 0
    code, _summary = execute(prep, progress=not args.no_progress, retry_errors=getattr(args, "retry_errors", False))
    return code


def cmd_score(args: argparse.Namespace) -> int:
    stats = rescore(args.run_dir)
    print(f"re-scored {stats['scored']} responses ({stats['changed']} changed validity; "
          f"{stats['errors']} failed calls have no response; {stats['failed']} could not be scored). "
          "No model was called.", file=sys.stderr)
    with RunStore(args.run_dir) as store:
        table = accuracy_table(store.rows())
    if table:
        print(table)
    return 1 if stats["failed"] else 0


def cmd_export(args: argparse.Namespace) -> int:
    with RunStore(Path(args.run_dir)) as store:
        if args.output:
            n = write_results(store.rows(), args.output)
        else:
            dump_results(store.rows(), sys.stdout)
    if args.output:
        print(f"exported {n} jobs to {args.output}", file=sys.stderr)
    return 0

