"""Conversation runs give the same verdicts, failure modes and pass^k under two promptgrid installs.

    .venv/bin/python benchmarks/identical_conversations.py --old /tmp/base_venv/bin/python --new .venv/bin/python

(``/tmp/base_venv``: a venv with ``pip install -e`` of a worktree of the baseline commit, e.g.
``git worktree add /tmp/base <commit>``.) The defaults (16 runs, about 7,000 episodes a side) take
about two minutes on two cores; ``--limit 0 --mini-mt mini-mt`` runs every conversation.

The conversation counterpart of ``identical_stores.py``: the check that a refactor of the conversation
engine changes no result. ``--old`` and ``--new`` are command prefixes that run Python with a promptgrid
install (the baseline, e.g. a venv of a worktree of the commit before the refactor, and the install under
test); each is split like a shell word list and ``-m promptgrid.matrix.cli ...`` is appended, so a
prefix may carry a launcher and its arguments (``--old "python /path/launcher.py /path/old-tree"``).
Words of a prefix that name an existing file or folder relative to the current directory are made
absolute, as every command runs in a working directory of its own. The two installs are only ever
used through their CLI, in subprocesses (no ``PYTHONPATH``, no ``OPENAI_API_KEY``, no ``PROMPTGRID_*``
variable but ``PROMPTGRID_BFCL_DATA``, an XDG cache per side), so they can be different checkouts.

The runs, each into a fresh run directory on each side (all offline, free fake models):

- ``run GRID --dataset D --model M [--limit N]`` for D in ``bfcl:multi_turn_base``,
  ``bfcl:multi_turn_miss_func``, ``bfcl:multi_turn_miss_param``, ``bfcl:multi_turn_long_context``
  (``--limit``, default 40 conversations each) and ``--mini-mt`` (default ``mini-mt:en,de,ja``, all its
  conversations unless ``--mini-mt-limit``), and M in ``fake/ground-truth`` (every entry right),
  ``fake/prose`` (never a call) and ``fake/noisy:7`` (the seeded model that makes the format errors models
  make); GRID is ``call_modes`` (prompt, constrained and native variants);
- pass^k: ``run GRID --dataset bfcl:multi_turn_base --model fake/noisy:7 --repeats 2 --temperature 1
  [--limit N]`` (above temperature 0 the noisy fake draws each repeat afresh, so pass^2 differs from
  accuracy).

Then, on each side and with that side's own CLI, ``export RUN -o FILE`` (one JSON object per episode) and
``report RUN --format json --out DIR`` (``conversations.json``), and three comparisons per run:

- verdicts, per episode (model, variant_id, conversation_id, repeat): ``valid``, ``failure_mode``,
  ``error``, the verdict's ``bfcl_error_type`` and ``argument_rule``, and per turn ``valid``,
  ``failure_mode``, ``bfcl_error_type`` and ``argument_rule_disagrees`` (how the other argument rule
  would score the turn). An episode on one side only, or twice in one export, is a difference;
- records (unless ``--verdicts-only``): the whole exported episode (steps and calls per turn, steps
  sent, tokens, cost, final answers, state differences, environment counters, ...); a top-level field
  only the new side's export has (a field added since, such as ``transcript``, the rebuilt steps) is
  counted and listed, not compared;
- report: every value of ``conversations.json`` (accuracy, pass^k tau-bench and Ticket-Bench with their
  intervals, turn accuracy, divergence, failure-mode counts, native gap, comparisons, languages), lists
  of records matched by what they are about (model, variant, turn, mode, language, ...) rather than by
  position. Numbers are compared exactly unless ``--rel-tol`` is given.

What is left out of the comparison, and why:

- ``latency_s``, in the export (the episode's and, in its ``transcript``, each step's) and anywhere in
  the report (wall-clock time of each episode and its sums per variant and model);
  ``details.environment.slowest_step_s`` and ``details.environment.peak_memory_mb`` of the export (the
  slowest environment step's time and the environment's peak memory: measurements of the machine, not
  results). Costs and tokens are compared,
  though the fakes' cost is always 0 and their input tokens are not counted, so those fields only check
  that they stay so;
- the console output of ``run`` and ``report`` (it holds the run's wall time; its numbers are the
  report's, compared in the JSON) and the ``report --format md`` text;
- the run directories' files themselves (the store's layout may change in a refactor; the export and
  the report are the interface that must not); the path of each side's working root is replaced by
  ``<ROOT>`` in every exported text.

Output: the promptgrid each side imports (file, commit, modified files), then one line per run:
episodes on each side, episodes compared, differing verdicts, records and report values, and the old
side's accuracy and pass^k; then the totals and wall time, and the first ``--show`` differences of every
comparison that has any (with the counts of each verdict change old -> new). Exit status 1 on any
difference or a command that fails, 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BFCL_CATEGORIES = ("bfcl:multi_turn_base", "bfcl:multi_turn_miss_func", "bfcl:multi_turn_miss_param",
                   "bfcl:multi_turn_long_context")
MODELS = ("fake/ground-truth", "fake/prose", "fake/noisy:7")
PASS_K_MODEL = "fake/noisy:7"
#: Paths (dotted) left out of the exported episodes (see the module docstring).
EXCLUDED_RECORD_PATHS = {"latency_s", "details.environment.slowest_step_s", "details.environment.peak_memory_mb"}
#: Keys left out wherever they occur in an exported episode's ``transcript`` (each step's answer time).
EXCLUDED_TRANSCRIPT_KEYS = {"latency_s"}
#: Keys left out wherever they occur in conversations.json.
EXCLUDED_REPORT_KEYS = {"latency_s"}
#: Fields that say what a record of a report list is about (its key when the list is matched).
IDENTITY_FIELDS = ("model", "variant_id", "reference", "other", "native", "prompt", "language", "level", "turn",
                   "mode", "rule")
ABSENT = "<absent>"  # a field one side's export or report does not have
SHOW = 5  # differences shown per comparison (--show)


@dataclass(frozen=True)
class Side:
    name: str
    prefix: tuple[str, ...]
    root: Path


@dataclass(frozen=True)
class RunSpec:
    name: str
    args: tuple[str, ...]


@dataclass
class Outcome:
    """One side's run of a spec: its exported episodes and report, or why there are none."""
    lines: list[dict[str, Any]] = field(default_factory=list)
    report: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    failure: str = ""


@dataclass
class Comparison:
    what: str
    compared: int = 0
    diffs: int = 0
    examples: list[str] = field(default_factory=list)
    changes: Counter[str] = field(default_factory=Counter)  # verdict changes "old -> new"


@dataclass
class RunResult:
    spec: RunSpec
    episodes: dict[str, int]
    comparisons: list[Comparison]
    summary: str


class CommandFailed(Exception):
    pass


# --------------------------------------------------------------------------- running

def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "OPENAI_API_KEY", "PYTHONHOME")
           and (not k.startswith("PROMPTGRID_") or k == "PROMPTGRID_BFCL_DATA")}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    env["XDG_CACHE_HOME"] = str(root / "cache")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _prefix(command: str) -> tuple[str, ...]:
    words = shlex.split(command)
    if not words:
        raise SystemExit(f"empty command prefix {command!r}: give e.g. --new .venv/bin/python")
    return tuple(str(Path(w).absolute()) if not w.startswith("-") and not os.path.isabs(w) and os.path.exists(w)
                 else w for w in words)


def _cli(side: Side, args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    cmd = [*side.prefix, "-m", "promptgrid.matrix.cli", *args]
    try:
        proc = subprocess.run(cmd, cwd=side.root / "cwd", env=_env(side.root), capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise CommandFailed(f"timed out after {timeout:.0f} s: {shlex.join(cmd)}") from None
    except OSError as exc:
        raise CommandFailed(f"cannot start {shlex.join(cmd)}: {exc}") from None
    if proc.returncode != 0:
        raise CommandFailed(f"rc {proc.returncode}: {shlex.join(cmd)}\n{(proc.stdout + proc.stderr)[-3000:]}")
    return proc


def _where(side: Side) -> str:
    code = ("import promptgrid.matrix.cli as c, os, subprocess; d = os.path.dirname(c.__file__); "
            "h = subprocess.run(['git', '-C', d, 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True); "
            "s = subprocess.run(['git', '-C', d, 'status', '--porcelain', '--untracked-files=no'], "
            "capture_output=True, text=True); n = len([x for x in s.stdout.splitlines() if x.strip()]); "
            "print(c.__file__, 'at', h.stdout.strip() or '?', f'({n} modified tracked files)' if n else '(clean)')")
    try:
        proc = subprocess.run([*side.prefix, "-c", code], cwd=side.root / "cwd", env=_env(side.root),
                              capture_output=True, text=True)
    except OSError as exc:
        raise SystemExit(f"--{side.name} {shlex.join(side.prefix)}: cannot start it: {exc}") from None
    if proc.returncode != 0:
        raise SystemExit(f"--{side.name} {shlex.join(side.prefix)}: cannot import promptgrid: {proc.stderr[-2000:]}")
    return proc.stdout.strip()


def run_side(side: Side, spec: RunSpec, timeout: float) -> Outcome:
    """Run ``spec`` into a fresh run directory of ``side``, export its episodes and write its JSON report."""
    run_dir = side.root / "runs" / spec.name
    export = side.root / "exports" / f"{spec.name}.jsonl"
    report_dir = side.root / "reports" / spec.name
    export.parent.mkdir(parents=True, exist_ok=True)
    out = Outcome()
    t = time.perf_counter()
    try:
        _cli(side, ["run", *spec.args, "--run-dir", str(run_dir), "--no-progress"], timeout)
        out.seconds = time.perf_counter() - t
        _cli(side, ["export", str(run_dir), "-o", str(export)], timeout)
        _cli(side, ["report", str(run_dir), "--format", "json", "--out", str(report_dir)], timeout)
        root = str(side.root)
        out.lines = [json.loads(line.replace(root, "<ROOT>"))
                     for line in export.read_text(encoding="utf-8").splitlines() if line.strip()]
        out.report = json.loads((report_dir / "conversations.json").read_text(encoding="utf-8"))
    except (CommandFailed, OSError, ValueError) as exc:
        out.failure = f"{side.name}: {exc}"
    return out


# --------------------------------------------------------------------------- extracting

def episode_key(obj: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(obj.get(k, ABSENT) for k in ("model", "variant_id", "conversation_id", "repeat"))


def _records(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def verdict_of(obj: dict[str, Any]) -> dict[str, Any]:
    """What an exported episode was scored: the episode's and each turn's validity and failure mode."""
    details = obj.get("details")
    verdict = details.get("verdict", {}) if isinstance(details, dict) else {}
    verdict = verdict if isinstance(verdict, dict) else {}
    scored = {t.get("turn"): t for t in _records(verdict.get("turns"))}
    listed = {t.get("index"): t for t in _records(obj.get("turns"))}
    turns = []
    for i in sorted(listed.keys() | scored.keys(), key=repr):
        top, deep = listed.get(i, {}), scored.get(i, {})
        deep_details: dict[str, Any] = deep["details"] if isinstance(deep.get("details"), dict) else {}
        turns.append({"turn": i, "valid": top.get("valid", ABSENT), "failure_mode": top.get("failure_mode", ABSENT),
                      "bfcl_error_type": deep.get("bfcl_error_type", ABSENT),
                      "argument_rule_disagrees": deep_details.get("argument_rule_disagrees")})
    return {"valid": obj.get("valid", ABSENT), "failure_mode": obj.get("failure_mode", ABSENT),
            "error": obj.get("error", ABSENT), "bfcl_error_type": verdict.get("bfcl_error_type", ABSENT),
            "argument_rule": verdict.get("argument_rule", ABSENT), "turns": turns}


def record_of(obj: dict[str, Any]) -> dict[str, Any]:
    """The exported episode without the measured fields of ``EXCLUDED_RECORD_PATHS``."""
    out: dict[str, Any] = json.loads(json.dumps(obj))  # a deep copy
    for path in EXCLUDED_RECORD_PATHS:
        *parents, last = path.split(".")
        node: Any = out
        for p in parents:
            node = node.get(p) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(last, None)
    _drop(out.get("transcript"), EXCLUDED_TRANSCRIPT_KEYS)
    return out


def _drop(value: Any, keys: set[str]) -> None:
    """Remove ``keys`` wherever they occur in ``value`` (in place)."""
    if isinstance(value, dict):
        for key in keys & value.keys():
            del value[key]
        for child in value.values():
            _drop(child, keys)
    elif isinstance(value, list):
        for child in value:
            _drop(child, keys)


def flatten(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(path, leaf) of a JSON value, ``EXCLUDED_REPORT_KEYS`` left out; a list of records is keyed by what each
    record is about (``IDENTITY_FIELDS``) where that tells them apart, by position otherwise; a list of scalars
    is one leaf."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k not in EXCLUDED_REPORT_KEYS:
                yield from flatten(v, f"{path}.{k}" if path else k)
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        labels = [",".join(f"{f}={v[f]}" for f in IDENTITY_FIELDS if f in v) for v in value]
        if len(set(labels)) < len(labels) or not all(labels):
            labels = [str(i) for i in range(len(value))]
        for label, v in zip(labels, value, strict=True):
            yield from flatten(v, f"{path}[{label}]")
    else:
        yield path, value


# --------------------------------------------------------------------------- comparing

def _short(v: Any, n: int = 200) -> str:
    s = json.dumps(v, ensure_ascii=False, sort_keys=True) if not isinstance(v, str) else repr(v)
    return s if len(s) <= n else s[:n] + f"...(+{len(s) - n})"


def _paths_differing(a: Any, b: Any, path: str = "") -> Iterator[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(a.keys() | b.keys()):
            yield from _paths_differing(a.get(k, ABSENT), b.get(k, ABSENT), f"{path}.{k}" if path else k)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            yield from _paths_differing(x, y, f"{path}[{i}]")
    elif a != b:
        yield f"{path or '(value)'}: old {_short(a)} new {_short(b)}"


def _keyed(lines: list[dict[str, Any]], cmp: Comparison, side: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for obj in lines:
        key = episode_key(obj)
        if key in out:
            cmp.diffs += 1
            if len(cmp.examples) < SHOW:
                cmp.examples.append(f"{_label(key)} twice in the {side} export")
        out[key] = obj
    return out


def _label(key: tuple[Any, ...]) -> str:
    model, variant, conversation, repeat = key
    return f"({model}, {variant}, {conversation}, repeat {repeat})"


def _turn_summary(verdict: dict[str, Any]) -> str:
    def one(v: Any, mode: Any) -> str:
        return "ok" if v is True else ("unfinished" if v is None else str(mode))
    turns = " ".join(one(t["valid"], t["failure_mode"]) for t in verdict["turns"])
    return f"{one(verdict['valid'], verdict['failure_mode'])} [{turns}]"


def compare_episodes(old: list[dict[str, Any]], new: list[dict[str, Any]], what: str,
                     project: Callable[[dict[str, Any]], dict[str, Any]]) -> Comparison:
    cmp = Comparison(what)
    a, b = _keyed(old, cmp, "old"), _keyed(new, cmp, "new")
    keys = sorted(a.keys() | b.keys(), key=repr)
    cmp.compared = len(keys)
    for key in keys:
        x, y = a.get(key), b.get(key)
        if x is None or y is None:
            cmp.diffs += 1
            cmp.changes[f"only in the {'new' if x is None else 'old'} export"] += 1
            if len(cmp.examples) < SHOW:
                cmp.examples.append(f"{_label(key)} only in the {'new' if x is None else 'old'} export")
            continue
        px, py = project(x), project(y)
        for added in set(py) - set(px):  # a field the new export adds (e.g. ``transcript``): counted, not a diff
            if project is record_of:
                cmp.changes[f"field only the new export has: {added}"] += 1
                py.pop(added)
        if px == py:
            continue
        cmp.diffs += 1
        if project is verdict_of:
            cmp.changes[f"{_turn_summary(px)} -> {_turn_summary(py)}"] += 1
        if len(cmp.examples) < SHOW:
            cmp.examples.append(f"{_label(key)}: " + "; ".join(list(_paths_differing(px, py))[:6]))
    return cmp


def _same(x: Any, y: Any, rel_tol: float) -> bool:
    if x == y:
        return True
    if rel_tol and isinstance(x, (int, float)) and isinstance(y, (int, float)) and not isinstance(x, bool):
        return math.isclose(x, y, rel_tol=rel_tol, abs_tol=rel_tol)
    if rel_tol and isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
        return all(_same(u, v, rel_tol) for u, v in zip(x, y, strict=True))
    return False


def compare_reports(old: dict[str, Any], new: dict[str, Any], rel_tol: float) -> Comparison:
    a, b = dict(flatten(old)), dict(flatten(new))
    cmp = Comparison("report values", compared=len(a.keys() | b.keys()))
    for path in sorted(a.keys() | b.keys()):
        x, y = a.get(path, ABSENT), b.get(path, ABSENT)
        if not _same(x, y, rel_tol):
            cmp.diffs += 1
            if len(cmp.examples) < SHOW:
                cmp.examples.append(f"{path}: old {_short(x)} new {_short(y)}")
    return cmp


def _summary(report: dict[str, Any]) -> str:
    """The headline numbers of a report, per model: accuracy and pass^k (tau-bench)."""
    parts = []
    for m in report.get("models", ()):
        acc, tau = m.get("accuracy"), (m.get("pass_k_tau") or {}).get("value")
        k = report.get("k", "?")
        acc_s = f"{acc:.3f}" if isinstance(acc, (int, float)) else "-"
        tau_s = f"{tau:.3f}" if isinstance(tau, (int, float)) else "-"
        parts.append(f"acc {acc_s} pass^{k} {tau_s}" if k != 1 else f"acc {acc_s}")
    return "; ".join(parts) or "-"


# --------------------------------------------------------------------------- main

def _slug(text: str) -> str:
    """A dataset or model as part of a folder name: ``mini-mt:en,de`` -> ``mini-mt-en-de``."""
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text)


def _specs(args: argparse.Namespace) -> list[RunSpec]:
    limit = ["--limit", str(args.limit)] if args.limit else []
    specs = []
    datasets = [(d, limit) for d in BFCL_CATEGORIES]
    datasets.append((args.mini_mt, ["--limit", str(args.mini_mt_limit)] if args.mini_mt_limit else []))
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    for dataset, lim in datasets:
        for model in models:
            name = f"{_slug(dataset.removeprefix('bfcl:'))}--{_slug(model)}"
            specs.append(RunSpec(name, (args.grid, "--dataset", dataset, "--model", model, *lim)))
    if args.repeats > 1:
        specs.append(RunSpec(f"pass{args.repeats}--multi_turn_base--{_slug(PASS_K_MODEL)}",
                             (args.grid, "--dataset", "bfcl:multi_turn_base", "--model", PASS_K_MODEL, "--repeats",
                              str(args.repeats), "--temperature", "1", *limit)))
    extra = ["--bfcl-data", args.bfcl_data] if args.bfcl_data else []
    return [RunSpec(s.name, (*s.args, *extra)) for s in specs]


def main() -> int:
    global SHOW
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--old", required=True, metavar="CMD", help="command prefix running Python with the baseline "
                   "promptgrid (e.g. /tmp/base_venv/bin/python)")
    p.add_argument("--new", required=True, metavar="CMD", help="command prefix running Python with the promptgrid "
                   "under test (e.g. .venv/bin/python)")
    p.add_argument("--grid", default="call_modes", help="grid of every run (default call_modes)")
    p.add_argument("--limit", type=int, default=40, metavar="N",
                   help="conversations per BFCL category and in the pass^k run (default 40; 0: all)")
    p.add_argument("--mini-mt", default="mini-mt:en,de,ja", metavar="DS", help="the mini-mt dataset "
                   "(default mini-mt:en,de,ja; mini-mt for all 9 languages)")
    p.add_argument("--mini-mt-limit", type=int, default=0, metavar="N",
                   help="--limit of the mini-mt runs (default 0: every conversation)")
    p.add_argument("--models", default=",".join(MODELS), help=f"comma-separated (default {','.join(MODELS)})")
    p.add_argument("--repeats", type=int, default=2, metavar="K",
                   help=f"repeats of the pass^k run ({PASS_K_MODEL}, temperature 1; default 2; 1: no such run)")
    p.add_argument("--bfcl-data", default=None, metavar="PATH", help="passed to every run (default: each side's "
                   "installed bfcl-eval, or $PROMPTGRID_BFCL_DATA)")
    p.add_argument("--verdicts-only", action="store_true", help="compare verdicts and reports, not whole records")
    p.add_argument("--rel-tol", type=float, default=0.0, help="tolerance for the report's numbers (default 0: exact)")
    p.add_argument("--jobs", type=int, default=2, help="commands run at once (default 2)")
    p.add_argument("--timeout", type=float, default=900, help="seconds per command (default 900)")
    p.add_argument("--show", type=int, default=SHOW, help=f"differences listed per comparison (default {SHOW})")
    p.add_argument("--keep", action="store_true", help="keep the run directories (their path is printed)")
    args = p.parse_args()
    SHOW = max(0, args.show)
    if args.limit < 0 or args.mini_mt_limit < 0 or args.repeats < 1 or args.jobs < 1:
        p.error("--limit and --mini-mt-limit must be >= 0, --repeats and --jobs >= 1")

    root = Path(tempfile.mkdtemp(prefix="identical-conversations-"))
    sides = {name: Side(name, _prefix(cmd), root / name) for name, cmd in (("old", args.old), ("new", args.new))}
    for s in sides.values():
        (s.root / "cwd").mkdir(parents=True)
        (s.root / "cache").mkdir()
    results: list[RunResult] = []
    failures: list[str] = []
    started = time.perf_counter()
    try:
        for s in sides.values():
            print(f"{s.name}: {shlex.join(s.prefix)}\n     {_where(s)}", flush=True)
        specs = _specs(args)
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = {(spec.name, s): pool.submit(run_side, sides[s], spec, args.timeout)
                       for spec in specs for s in sides}
            for spec in specs:
                outcomes = {s: futures[(spec.name, s)].result() for s in sides}
                failed = [o.failure for o in outcomes.values() if o.failure]
                timing = ", ".join(f"{s} {o.seconds:.1f} s" for s, o in outcomes.items())
                if failed:
                    failures.extend(f"{spec.name}: {f}" for f in failed)
                    print(f"  {spec.name}: FAILED ({timing})", flush=True)
                    continue
                old, new = outcomes["old"], outcomes["new"]
                comparisons = [compare_episodes(old.lines, new.lines, "verdicts", verdict_of)]
                if not args.verdicts_only:
                    comparisons.append(compare_episodes(old.lines, new.lines, "records", record_of))
                comparisons.append(compare_reports(old.report, new.report, args.rel_tol))
                episodes = {"old": len(old.lines), "new": len(new.lines)}
                if not old.lines:
                    failures.append(f"{spec.name}: no episode on the old side: nothing was compared")
                results.append(RunResult(spec, episodes, comparisons, _summary(old.report)))
                diffs = sum(c.diffs for c in comparisons)
                print(f"  {spec.name}: {episodes['old']} episodes, {diffs} differences ({timing})", flush=True)
    finally:
        if args.keep:
            print(f"run directories kept under {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    wall = time.perf_counter() - started

    # ----------------------------------------------------------------------- report
    print()
    what = [c.what for c in results[0].comparisons] if results else []
    header = ("run", "episodes old", "new", "compared", *what, "old: accuracy / pass^k")
    table = [header]
    for r in results:
        table.append((r.spec.name, str(r.episodes["old"]), str(r.episodes["new"]), str(r.comparisons[0].compared),
                      *(f"{c.diffs}/{c.compared}" if c.what == "report values" else str(c.diffs)
                        for c in r.comparisons), r.summary))
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for i, row in enumerate(table):
        print("  ".join(cell.ljust(w) if j in (0, len(row) - 1) else cell.rjust(w)
                        for j, (cell, w) in enumerate(zip(row, widths, strict=True))).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))
    compared = sum(r.comparisons[0].compared for r in results)
    by_kind = Counter[str]()
    for r in results:
        for c in r.comparisons:
            by_kind[c.what] += c.diffs
    total = sum(by_kind.values())
    print(f"\n{len(results)} runs, {compared} episodes compared, {total} differences ("
          + ", ".join(f"{k} {v}" for k, v in by_kind.items()) + f"); wall time {wall:.0f} s")
    for r in results:
        for c in r.comparisons:
            if not c.diffs:
                continue
            print(f"\nDIFFERENCES in {r.spec.name} / {c.what} ({c.diffs}), the first {len(c.examples)}:")
            print(f"  command: run {shlex.join(r.spec.args)}")
            for e in c.examples:
                print(f"  {e}")
            if c.changes:
                print("  verdict changes old -> new (episode [turns]):")
                for change, n in c.changes.most_common(SHOW):
                    print(f"    {n:5d}  {change}")
    for f in failures:
        print(f"\nFAILED: {f}")
    return 1 if total or failures else 0


if __name__ == "__main__":
    sys.exit(main())
