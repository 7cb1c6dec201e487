"""Exhaustive runs store the same rows under two promptgrid installs (a refactor's equivalence check).

    .venv/bin/python benchmarks/identical_stores.py --old /tmp/base_venv/bin/python --new .venv/bin/python

``--old`` and ``--new`` are the Python interpreters of two promptgrid installs (e.g. a worktree of the
commit before a runner refactor, and this tree). Each command below is run once with each interpreter
(``PY -m promptgrid.matrix.cli ...``, a subprocess, working directory and XDG cache of its own, no
``PYTHONPATH``, no ``OPENAI_API_KEY``, no ``PROMPTGRID_*`` variables) into a fresh run directory, and
the two run directories are compared:

- every table of ``store.sqlite3`` (meta, models, variants, cases, calls, jobs, batches, batch_jobs:
  whatever either store has), row for row by primary key, every column but those listed below;
  a table or a column only one store has is a difference;
- ``promptgrid export --jsonl`` of the run (each side's own exporter), line for line, without
  ``latency_s``;
- for ``export-batch``: the request files, byte for byte.

The commands (no ``--goal``: every job of the grid):

a. ``run bfcl_v4 --dataset mini --model fake/auto`` (all 9 languages, the in-process fake model);
b. ``run call_modes --dataset mini:en,de --model fake/auto --repeats 2 --seed 3``;
c. ``run bfcl_v4 --dataset mini:en --model openai/fake-model --api-base URL --concurrency 16`` against
   the fake OpenAI-compatible server (``tests/support/fake_server.py`` of this checkout, its own process,
   answering after ``--latency`` seconds);
d. resume: command c, interrupted with SIGINT ``--interrupt-after`` seconds after the server logged its
   first request, then run again to the end. Each side's resumed run is compared with the *old*
   side's uninterrupted run c (old vs old is the control: what resuming changes under the baseline);
   a note says how many calls were stored when the run was interrupted (not part-way is a failure);
e. ``export-batch RUN_DIR --model openai/fake-model --grid bfcl_v4 --dataset mini:en -o FILE`` into a
   fresh run directory: the request files byte for byte, and the stores it leaves;
f. e, then the request file answered offline by the fake server (``--answer-batch IN OUT``, as
   ``vllm run-batch`` would: once, from the old side's request file, as its answers carry random ids
   and times) and that one answer file stored by each side with ``import-batch RUN_DIR OUT``: the
   request files byte for byte, and the stores;
g. command c with ``--batch --poll 0.2``: the calls go through the fake server's files + batches API.

What is left out of the comparison, and why:

- ``calls.latency_s`` and ``calls.finished_at`` (and ``latency_s`` in the export): wall-clock
  measurements of each call, different on every run;
- ``batches.created_at`` and ``batches.updated_at``: wall-clock times of the export;
- the value of ``batches.id`` (and ``batch_jobs.batch``, which refers to it): ``export-<UTC time>-<random
  hex>`` or ``pg-<UTC time>-<random hex>``, new on every batch. Ids are replaced by ``<batch N>``, N in
  the order of created_at, so that which jobs belong to which batch is still compared;
- the values of ``batches.provider_id``, ``input_file``, ``output_file`` and ``error_file``: ids the
  (fake) provider makes up (``batch_<uuid>``, ``file-<uuid>``). Whether each is set is still compared
  (a value becomes ``<provider id>``, NULL stays NULL);
- the path of each side's working root (run directories, output files, caches live under
  ``ROOT/old`` and ``ROOT/new``): replaced by ``<ROOT>`` in every text value (``batches.detail``
  names the output file), so two paths compare equal exactly when they are the same below the root.

Everything else is compared as stored, the integer ids of models, variants and cases included (the order
in which rows were first written is part of what a store holds). ``run.json`` is not compared (it holds
timestamps, invocation ids and the run's configuration, whose fields may grow); its config keys present
on one side only are printed for information.

The fake server is this checkout's ``tests/support/fake_server.py``, run by ``--server-python`` (default: the
interpreter running this script, whose promptgrid has the fake answers it imports), a fresh process for every
run, always on the same port (chosen once), so that the api_base a run records is the same on both
sides; it answers each request from the request alone (no faults are scripted), so both sides get the
same answers whatever order their calls leave in.

Output: one line per command and table: rows of each side, rows compared (the union of primary keys),
and differences (0 expected), then the first differing rows of every comparison that has any. Exit
status 1 on any difference (or a command that fails), 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The fake OpenAI-compatible server both sides are run against (a test fixture, not in the package).
FAKE_SERVER = Path(__file__).resolve().parents[1] / "tests" / "support" / "fake_server.py"
#: Columns left out of the store comparison (see the module docstring).
EXCLUDED_COLUMNS = {
    "calls": {"latency_s", "finished_at"},
    "batches": {"created_at", "updated_at"},
}
#: Fields left out of the export comparison.
EXCLUDED_EXPORT_FIELDS = {"latency_s", "finished_at"}
#: Columns holding a batch id (normalized to ``<batch N>``).
BATCH_ID_COLUMNS = {"batches": "id", "batch_jobs": "batch"}
#: Columns holding an id the provider made up (normalized to ``<provider id>`` when set).
PROVIDER_ID_COLUMNS = {"batches": {"provider_id", "input_file", "output_file", "error_file"}}
SHOW = 5  # differing rows shown per comparison


@dataclass
class Comparison:
    command: str
    what: str  # table name, "export --jsonl", "request file", ...
    rows_old: int
    rows_new: int
    compared: int
    diffs: int
    examples: list[str] = field(default_factory=list)
    note: str = ""


class CommandFailed(Exception):
    pass


# --------------------------------------------------------------------------- running

def _env(side_root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "OPENAI_API_KEY", "PYTHONHOME") and not k.startswith("PROMPTGRID_")}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    env["XDG_CACHE_HOME"] = str(side_root / "cache")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _cli(py: str, side_root: Path, args: list[str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    cmd = [py, "-m", "promptgrid.matrix.cli", *args]
    proc = subprocess.run(cmd, cwd=side_root / "cwd", env=_env(side_root), capture_output=True, text=True,
                          timeout=timeout)
    if proc.returncode != 0:
        raise CommandFailed(f"rc {proc.returncode}: {' '.join(cmd)}\n{(proc.stdout + proc.stderr)[-3000:]}")
    return proc


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """The fake OpenAI-compatible server in its own process, on ``port``, logging to ``log``."""

    def __init__(self, py: str, port: int, log: Path, latency: float) -> None:
        self.log = log
        self.url = f"http://127.0.0.1:{port}/v1"
        script = json.dumps({"latency_s": latency})
        env = _env(log.parent)
        env.pop("XDG_CACHE_HOME")
        stderr = log.with_suffix(".stderr")
        for _ in range(50):  # the port of the previous server may still be closing
            with stderr.open("w") as err:
                self.proc = subprocess.Popen(
                    [py, str(FAKE_SERVER), "--script", script, "--port", str(port),
                     "--log", str(log)], stdout=subprocess.PIPE, stderr=err, text=True, cwd=log.parent, env=env)
            assert self.proc.stdout is not None
            line = self.proc.stdout.readline()
            if line.startswith("PORT "):
                return
            self.proc.wait()
            time.sleep(0.2)
        raise RuntimeError(f"fake server did not start on port {port}: {stderr.read_text()[-2000:]}")

    def requests(self) -> int:
        try:
            return sum(1 for _ in self.log.open())
        except FileNotFoundError:
            return 0

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _interrupted(py: str, side_root: Path, args: list[str], server: Server, after_s: float) -> int:
    """Run the CLI, SIGINT it ``after_s`` seconds after the server saw its first request; its exit status."""
    cmd = [py, "-m", "promptgrid.matrix.cli", *args]
    proc = subprocess.Popen(cmd, cwd=side_root / "cwd", env=_env(side_root), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while server.requests() == 0 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(after_s)
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    if proc.returncode not in (0, 1, 2, 130, -signal.SIGINT):
        raise CommandFailed(f"interrupted run: rc {proc.returncode}: {' '.join(cmd)}\n{out[-3000:]}")
    return proc.returncode


# --------------------------------------------------------------------------- comparing

def _normalize(value: Any, root: str) -> Any:
    if isinstance(value, str) and root in value:
        return value.replace(root, "<ROOT>")
    return value


def _table_rows(db: sqlite3.Connection, table: str, root: str) -> tuple[list[str], list[str], dict[tuple, tuple]]:
    """(compared columns, primary key columns, {normalized key: normalized compared values})."""
    info = db.execute(f'PRAGMA table_info("{table}")').fetchall()
    columns = [r[1] for r in info]
    pk = [r[1] for r in sorted((r for r in info if r[5]), key=lambda r: r[5])] or columns
    excluded = EXCLUDED_COLUMNS.get(table, set())
    kept = [c for c in columns if c not in excluded]
    batch_names: dict[str, str] = {}
    if BATCH_ID_COLUMNS.get(table) and "batches" in _tables(db):
        order = db.execute("SELECT id FROM batches ORDER BY created_at, id").fetchall()
        batch_names = {bid: f"<batch {i + 1}>" for i, (bid,) in enumerate(order)}
    rows: dict[tuple, tuple] = {}
    quoted = ", ".join(f'"{c}"' for c in columns)
    for raw in db.execute(f'SELECT {quoted} FROM "{table}"'):
        rec = dict(zip(columns, raw, strict=True))
        if table in BATCH_ID_COLUMNS:
            col = BATCH_ID_COLUMNS[table]
            rec[col] = batch_names.get(rec[col], rec[col])
        for col in PROVIDER_ID_COLUMNS.get(table, ()):
            if rec.get(col) is not None:
                rec[col] = "<provider id>"
        rec = {c: _normalize(v, root) for c, v in rec.items()}
        key = tuple(rec[c] for c in pk)
        if key in rows:  # a key normalization collided: keep both, visibly
            key = (*key, f"#dup{len(rows)}")
        rows[key] = tuple(rec[c] for c in kept)
    return kept, pk, rows


def _tables(db: sqlite3.Connection) -> list[str]:
    return sorted(r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")
                  if not r[0].startswith("sqlite_"))


def _short(v: Any, n: int = 160) -> str:
    s = repr(v)
    return s if len(s) <= n else s[:n] + f"...(+{len(s) - n})"


def compare_stores(command: str, old_dir: Path, new_dir: Path, old_root: Path, new_root: Path) -> list[Comparison]:
    old_db = sqlite3.connect(f"file:{old_dir / 'store.sqlite3'}?mode=ro", uri=True)
    new_db = sqlite3.connect(f"file:{new_dir / 'store.sqlite3'}?mode=ro", uri=True)
    out = []
    try:
        old_tables, new_tables = set(_tables(old_db)), set(_tables(new_db))
        for table in sorted(old_tables | new_tables):
            if table not in old_tables or table not in new_tables:
                side = "old" if table in old_tables else "new"
                n = (old_db if side == "old" else new_db).execute(f'SELECT COUNT(*) FROM "{table}"').fetchone()[0]
                out.append(Comparison(command, table, n if side == "old" else 0, n if side == "new" else 0, n, n + 1,
                                      [f"table {table} only in the {side} store ({n} rows)"]))
                continue
            old_cols, pk, old_rows = _table_rows(old_db, table, str(old_root))
            new_cols, _, new_rows = _table_rows(new_db, table, str(new_root))
            cmp = Comparison(command, table, len(old_rows), len(new_rows), len(old_rows.keys() | new_rows.keys()), 0)
            if old_cols != new_cols:
                cmp.diffs += 1
                cmp.examples.append(f"columns differ: old {old_cols} new {new_cols}")
            for key in sorted(old_rows.keys() | new_rows.keys(), key=repr):
                a, b = old_rows.get(key), new_rows.get(key)
                if a == b:
                    continue
                cmp.diffs += 1
                if len(cmp.examples) >= SHOW:
                    continue
                label = ", ".join(f"{c}={_short(k, 70)}" for c, k in zip(pk, key, strict=False))
                if a is None or b is None:
                    cmp.examples.append(f"{table}[{label}] only in the {'new' if a is None else 'old'} store: "
                                        f"{_short(a if b is None else b, 300)}")
                else:
                    cols = old_cols if old_cols == new_cols else [f"#{i}" for i in range(max(len(a), len(b)))]
                    parts = [f"{c}: old {_short(x)} new {_short(y)}"
                             for c, x, y in zip(cols, a, b, strict=False) if x != y]
                    cmp.examples.append(f"{table}[{label}] " + "; ".join(parts))
            out.append(cmp)
    finally:
        old_db.close()
        new_db.close()
    return out


def _export_lines(py: str, side_root: Path, run_dir: Path) -> list[str]:
    target = side_root / "exports" / (run_dir.name + ".jsonl")
    target.parent.mkdir(parents=True, exist_ok=True)
    _cli(py, side_root, ["export", "--jsonl", str(run_dir), "-o", str(target)])
    lines = []
    for line in target.read_text(encoding="utf-8").splitlines():
        obj = json.loads(line.replace(str(side_root), "<ROOT>"))
        for f in EXCLUDED_EXPORT_FIELDS:
            obj.pop(f, None)
        lines.append(json.dumps(obj, sort_keys=True, ensure_ascii=False))
    return lines


def compare_exports(command: str, old_lines: list[str], new_lines: list[str]) -> Comparison:
    cmp = Comparison(command, "export --jsonl", len(old_lines), len(new_lines), max(len(old_lines), len(new_lines)), 0)
    for i in range(cmp.compared):
        a = old_lines[i] if i < len(old_lines) else None
        b = new_lines[i] if i < len(new_lines) else None
        if a == b:
            continue
        cmp.diffs += 1
        if len(cmp.examples) < SHOW:
            if a is None or b is None:
                cmp.examples.append(f"line {i + 1} only in the {'new' if a is None else 'old'} export: "
                                    f"{_short(a if b is None else b, 300)}")
            else:
                ja, jb = json.loads(a), json.loads(b)
                parts = [f"{k}: old {_short(ja.get(k))} new {_short(jb.get(k))}"
                         for k in sorted(ja.keys() | jb.keys()) if ja.get(k) != jb.get(k)]
                cmp.examples.append(f"line {i + 1} ({ja.get('model')}, {ja.get('variant_id')}, {ja.get('case_id')}, "
                                    f"repeat {ja.get('repeat')}): " + "; ".join(parts))
    if cmp.diffs and sorted(old_lines) == sorted(new_lines):
        cmp.note = "same lines in another order"
    return cmp


def compare_bytes(command: str, old_file: Path, new_file: Path, what: str = "request file (bytes)") -> Comparison:
    a, b = old_file.read_bytes(), new_file.read_bytes()
    la, lb = a.splitlines(keepends=True), b.splitlines(keepends=True)
    cmp = Comparison(command, what, len(la), len(lb), max(len(la), len(lb)), 0,
                     note=f"{len(a)} / {len(b)} bytes")
    if a != b:
        for i in range(cmp.compared):
            x = la[i] if i < len(la) else None
            y = lb[i] if i < len(lb) else None
            if x != y:
                cmp.diffs += 1
                if len(cmp.examples) < SHOW:
                    cmp.examples.append(f"line {i + 1}: old {_short(x, 300)} new {_short(y, 300)}")
        cmp.diffs = max(cmp.diffs, 1)
    return cmp


def _config_keys_note(old_dir: Path, new_dir: Path) -> str:
    try:
        a = json.loads((old_dir / "run.json").read_text())["config"]
        b = json.loads((new_dir / "run.json").read_text())["config"]
    except (OSError, KeyError, ValueError) as exc:
        return f"run.json not read: {exc}"
    only_old, only_new = sorted(a.keys() - b.keys()), sorted(b.keys() - a.keys())
    return (f"run.json config keys only in old: {only_old or '-'}; only in new: {only_new or '-'} "
            "(information, not compared)")


def _stored_calls(run_dir: Path) -> tuple[int, int]:
    """(calls stored, jobs recorded) of a run directory."""
    db = sqlite3.connect(f"file:{run_dir / 'store.sqlite3'}?mode=ro", uri=True)
    try:
        calls = db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
        jobs = db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]
    finally:
        db.close()
    return calls, jobs


# --------------------------------------------------------------------------- the commands

def _where(py: str) -> str:
    code = ("import promptgrid.matrix.running.runner as r, os, subprocess; d = os.path.dirname(r.__file__); "
            "h = subprocess.run(['git', '-C', d, 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True); "
            "s = subprocess.run(['git', '-C', d, 'status', '--porcelain', '--untracked-files=no'], "
            "capture_output=True, text=True); n = len([x for x in s.stdout.splitlines() if x.strip()]); "
            "print(r.__file__, 'at', h.stdout.strip() or '?', f'({n} modified tracked files)' if n else '(clean)')")
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run([py, "-c", code], cwd=tmp, env=_env(Path(tmp)), capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{py}: cannot import promptgrid: {proc.stderr[-2000:]}")
    return proc.stdout.strip()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--old", required=True, help="Python interpreter of the baseline install")
    p.add_argument("--new", required=True, help="Python interpreter of the install under test")
    p.add_argument("--server-python", default=None,
                   help="interpreter that runs this checkout's fake server (default: the one running this script)")
    p.add_argument("--latency", type=float, default=0.05, help="fake server answer latency, seconds (default 0.05)")
    p.add_argument("--interrupt-after", type=float, default=1.0,
                   help="d: SIGINT this many seconds after the server's first request (default 1)")
    p.add_argument("--only", default="abcdefg", help="which commands to run (default abcdefg)")
    p.add_argument("--keep", action="store_true", help="keep the run directories (their path is printed)")
    args = p.parse_args()
    sides = {"old": args.old, "new": args.new}
    server_py = args.server_python or sys.executable

    print(f"old: {args.old}\n     {_where(args.old)}")
    print(f"new: {args.new}\n     {_where(args.new)}")

    root = Path(tempfile.mkdtemp(prefix="identical-stores-"))
    roots = {s: root / s for s in sides}
    for r in roots.values():
        (r / "cwd").mkdir(parents=True)
        (r / "cache").mkdir()
    port = _free_port()
    results: list[Comparison] = []
    notes: list[str] = []
    config_notes: dict[str, list[str]] = {}  # run.json note -> the commands it holds for
    failures: list[str] = []

    def server(side: str, name: str) -> Server:
        return Server(server_py, port, roots[side] / f"server-{name}.jsonl", args.latency)

    def both(command: str, name: str, fn: Any) -> dict[str, Path] | None:
        """Run ``fn(side, run_dir)`` for both sides; compare their stores and exports."""
        dirs = {s: roots[s] / name for s in sides}
        try:
            for s in sides:
                t = time.perf_counter()
                fn(s, dirs[s])
                print(f"  {name} {s}: {time.perf_counter() - t:.1f} s", flush=True)
        except (CommandFailed, subprocess.TimeoutExpired) as exc:
            failures.append(f"{command}: {exc}")
            print(f"  {name}: FAILED\n{exc}", flush=True)
            return None
        results.extend(compare_stores(command, dirs["old"], dirs["new"], roots["old"], roots["new"]))
        try:
            results.append(compare_exports(command, _export_lines(sides["old"], roots["old"], dirs["old"]),
                                           _export_lines(sides["new"], roots["new"], dirs["new"])))
        except CommandFailed as exc:
            failures.append(f"{command} export: {exc}")
        config_notes.setdefault(_config_keys_note(dirs["old"], dirs["new"]), []).append(command.split(":")[0])
        return dirs

    def plain(run_args: list[str]) -> Any:
        return lambda s, d: _cli(sides[s], roots[s], ["run", *run_args, "--run-dir", str(d), "--no-progress"])

    fake_args = ["bfcl_v4", "--dataset", "mini:en", "--model", "openai/fake-model", "--api-base",
                 f"http://127.0.0.1:{port}/v1", "--concurrency", "16"]

    def online(s: str, d: Path) -> None:
        with server(s, d.name):
            _cli(sides[s], roots[s], ["run", *fake_args, "--run-dir", str(d), "--no-progress"])

    try:
        if "a" in args.only:
            both("a: bfcl_v4 x mini, fake/auto", "a",
                 plain(["bfcl_v4", "--dataset", "mini", "--model", "fake/auto"]))
        if "b" in args.only:
            both("b: call_modes x mini:en,de, fake/auto, repeats 2, seed 3", "b",
                 plain(["call_modes", "--dataset", "mini:en,de", "--model", "fake/auto", "--repeats", "2",
                        "--seed", "3"]))
        c_dirs = None
        if "c" in args.only or "d" in args.only:
            c_dirs = both("c: bfcl_v4 x mini:en, openai/fake-model via HTTP, conc 16", "c", online)
        if "d" in args.only and c_dirs is not None:
            d_dirs = {s: roots[s] / "d" for s in sides}
            total = _stored_calls(c_dirs["old"])[0]
            ok = True
            for s in sides:
                d = d_dirs[s]
                try:
                    with server(s, "d-interrupted") as srv:
                        rc = _interrupted(sides[s], roots[s], ["run", *fake_args, "--run-dir", str(d), "--no-progress"],
                                          srv, args.interrupt_after)
                    stored, jobs = _stored_calls(d)
                    part_way = 0 < stored < total
                    notes.append(f"d: {s} interrupted with SIGINT: rc {rc}, {stored} of {total} calls stored "
                                 f"({jobs} jobs recorded)"
                                 + ("" if part_way else "  <-- NOT part-way: the resume is not exercised"))
                    if not part_way:
                        failures.append(f"d: {s} run was not interrupted part-way ({stored} of {total} calls)")
                    with server(s, "d-resumed"):
                        _cli(sides[s], roots[s], ["run", *fake_args, "--run-dir", str(d), "--no-progress"])
                    print(f"  d {s}: interrupted at {stored}/{total} calls, resumed", flush=True)
                except (CommandFailed, subprocess.TimeoutExpired) as exc:
                    failures.append(f"d ({s}): {exc}")
                    print(f"  d {s}: FAILED\n{exc}", flush=True)
                    ok = False
            if ok:
                base_export = _export_lines(sides["old"], roots["old"], c_dirs["old"])
                for s in sides:
                    label = f"d: {s} interrupted+resumed vs old uninterrupted (c)"
                    results.extend(compare_stores(label, c_dirs["old"], d_dirs[s], roots["old"], roots[s]))
                    try:
                        results.append(compare_exports(label, base_export,
                                                       _export_lines(sides[s], roots[s], d_dirs[s])))
                    except CommandFailed as exc:
                        failures.append(f"{label} export: {exc}")
        if "e" in args.only:
            def export_batch(s: str, d: Path) -> None:
                _cli(sides[s], roots[s], ["export-batch", str(d), "--model", "openai/fake-model", "--grid", "bfcl_v4",
                                          "--dataset", "mini:en", "-o", str(roots[s] / "e-requests.jsonl")])

            command = "e: export-batch bfcl_v4 x mini:en, openai/fake-model"
            if both(command, "e", export_batch) is not None:
                results.append(compare_bytes(command, roots["old"] / "e-requests.jsonl",
                                             roots["new"] / "e-requests.jsonl"))
        if "f" in args.only:
            def export_import(s: str, d: Path) -> None:
                requests, answers = roots[s] / "f-requests.jsonl", root / "f-answers.jsonl"
                _cli(sides[s], roots[s], ["export-batch", str(d), "--model", "openai/fake-model", "--grid", "bfcl_v4",
                                          "--dataset", "mini:en", "-o", str(requests)])
                if not answers.exists():  # one answer file for both sides
                    proc = subprocess.run([server_py, str(FAKE_SERVER), "--answer-batch",
                                           str(requests), str(answers)], cwd=roots[s] / "cwd", env=_env(roots[s]),
                                          capture_output=True, text=True)
                    if proc.returncode != 0:
                        raise CommandFailed(f"fake_server --answer-batch: rc {proc.returncode}: {proc.stderr[-2000:]}")
                _cli(sides[s], roots[s], ["import-batch", str(d), str(answers)])

            command = "f: export-batch, answered, import-batch"
            if both(command, "f", export_import) is not None:
                results.append(compare_bytes(command, roots["old"] / "f-requests.jsonl",
                                             roots["new"] / "f-requests.jsonl"))
        if "g" in args.only:
            def batch(s: str, d: Path) -> None:
                with server(s, d.name):
                    _cli(sides[s], roots[s], ["run", *fake_args, "--batch", "--poll", "0.2", "--run-dir", str(d),
                                              "--no-progress"])

            both("g: c with --batch (files + batches API)", "g", batch)
    finally:
        if args.keep:
            print(f"run directories kept under {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)

    # ----------------------------------------------------------------------- report
    print()
    header = ("command", "table", "rows old", "rows new", "compared", "differences")
    table = [header] + [(r.command, r.what + (f" ({r.note})" if r.note else ""), str(r.rows_old), str(r.rows_new),
                         str(r.compared), str(r.diffs)) for r in results]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for i, row in enumerate(table):
        cells = zip(row, widths, strict=True)
        print("  ".join(cell.ljust(w) if j < 2 else cell.rjust(w) for j, (cell, w) in enumerate(cells)))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    total = sum(r.diffs for r in results)
    print(f"\n{len(results)} comparisons, {sum(r.compared for r in results)} rows compared, {total} differences")
    for n in notes:
        print(f"note: {n}")
    for n, commands in config_notes.items():
        print(f"note: {', '.join(commands)}: {n}")
    for r in results:
        if r.diffs:
            print(f"\nDIFFERENCES in {r.command} / {r.what} ({r.diffs}), the first {len(r.examples)}:")
            for e in r.examples:
                print(f"  {e}")
    for f in failures:
        print(f"\nFAILED: {f}")
    return 1 if total or failures else 0


if __name__ == "__main__":
    sys.exit(main())
