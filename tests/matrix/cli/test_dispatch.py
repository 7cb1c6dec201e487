"""CLI dispatch: handlers are functions (no strings), and a command imports only what it needs."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any

from promptgrid.matrix.cli import build_parser


def _subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    out = []
    for action in parser._actions:  # argparse keeps subparsers only here
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out += _subparsers(sub) or [sub]
    return out


def test_every_command_has_a_function_handler() -> None:
    commands = _subparsers(build_parser())
    names = {sub.prog.split(" ", 1)[1] for sub in commands}
    assert {"run", "status", "report", "export", "grid show"} <= names and len(commands) >= 14
    for sub in commands:
        handler = sub.get_default("handler")
        assert callable(handler), sub.prog


def test_render_imports_no_litellm_and_no_matplotlib() -> None:
    code = ("import sys, io, contextlib; from promptgrid.matrix.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    assert main(['render', 'bfcl_v4', '--dataset', 'mini:en', '--limit', '1', '--jsonl']) == 0\n"
            "print(sorted(m for m in ('litellm', 'matplotlib') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_a_single_turn_run_directory_loads_no_conversation_machinery(tmp_path: Any) -> None:
    """Recognising a conversation dataset or run directory (every run, status, report, export) is cheap: the
    conversation reports, environments and runner are not imported for a single-turn one."""
    code = ("import sys, io, contextlib; from promptgrid.matrix.cli import main\n"
            f"run_dir = {str(tmp_path / 'run')!r}\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
            "    assert main(['run', 'bfcl_v4', '--dataset', 'mini:en', '--model', 'fake/auto', '--limit', '1',\n"
            "                 '--run-dir', run_dir]) == 0\n"
            "    assert main(['status', run_dir, '--no-poll']) == 0\n"
            "import json\n"
            "print(json.dumps([m for m in sys.modules if m.startswith('promptgrid.')]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    loaded = set(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert "promptgrid.matrix.running.runner" in loaded  # what a single-turn run loads is listed
    assert not loaded & {"promptgrid.matrix.report._conversations", "promptgrid.matrix.episodes._environment",
                         "promptgrid.matrix.episodes._worker", "promptgrid.matrix.running.conversation_runner",
                         "promptgrid.matrix.running.conversation_batch",
                         "promptgrid.matrix.datasets._conversations"}, sorted(loaded)
