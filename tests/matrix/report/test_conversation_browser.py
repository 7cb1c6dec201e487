"""conversations.html in a real browser: headless Chromium parses the page written by ``promptgrid report``, and
its DOM holds the figures, the tables and the transcripts, with a hostile answer as text, never as an element.

Skipped when no Chromium is installed (Debian: apt-get install chromium) or bfcl-eval is missing.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from promptgrid.matrix.cli import main
from promptgrid.matrix.conversations import load_conversations
from promptgrid.variants import Variant
from support.episodes import CallThenProse, run_conversations

_CHROMIUM = next((p for p in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser"))
                  if p and Path(p).exists()), None)
pytestmark = pytest.mark.skipif(_CHROMIUM is None, reason="chromium is not installed")
pytest.importorskip("bfcl_eval.eval_checker.multi_turn_eval.func_source_code.gorilla_file_system")

_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
          "--disable-background-networking", "--disable-component-update", "--disable-sync"]
HOSTILE_MODEL = "test/html"
HTML_ANSWERS = CallThenProse(HOSTILE_MODEL, "[cd(folder='<script>document.title=\"owned\"</script>')]",
                             '<script>document.title="owned"</script><img src=x onerror="document.title=1">')
"""A call with an HTML argument, then an answer in HTML."""


def _dom(page: Path, tmp: Path) -> str:
    assert _CHROMIUM is not None
    proc = subprocess.run([_CHROMIUM, *_FLAGS, f"--user-data-dir={tmp / 'profile'}", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_dom_has_figures_tables_and_transcripts(tmp_path: Path) -> None:
    run_dir, out = tmp_path / "run", tmp_path / "report"
    assert main(["run", "call_modes", "--dataset", "bfcl:multi_turn_base", "--model", "fake/ground-truth",
                 "--model", "fake/noisy", "--limit", "2", "--run-dir", str(run_dir)]) == 0
    assert main(["report", str(run_dir), "--format", "html", "--out", str(out)]) == 0
    dom = _dom(out / "conversations.html", tmp_path)
    assert "<title>promptgrid: Conversation report</title>" in dom
    for figure in ("pass_k", "turns", "native_gap"):
        assert re.search(rf'<figure class="svg" id="figure-{figure}"><svg [^>]*role="img"', dom), figure
    assert dom.count("<svg") >= 3 and "pass^" in dom
    for key in ("conv-variants", "conv-models", "conv-comparisons", "conv-turns", "conv-divergence",
                "conv-failures", "conv-native"):
        assert f'id="{key}"' in dom
    assert dom.count("<table>") >= 7  # the report's tables (the transcripts' tables have a class)
    assert 0 < dom.count('<details class="episode"') <= 12
    assert "Turn 0" in dom and 'class="badge bad"' in dom and 'class="badge ok"' in dom
    assert '<table class="calls">' in dom  # calls with their results


def test_dom_holds_a_hostile_answer_as_text(tmp_path: Path) -> None:
    run_dir, out = tmp_path / "run", tmp_path / "report"
    run_conversations([Variant()], load_conversations("bfcl:multi_turn_base", limit=1), models=[HOSTILE_MODEL],
                      run_dir=run_dir, clients={HOSTILE_MODEL: HTML_ANSWERS},
                      describe={"dataset": "bfcl:multi_turn_base"})
    assert main(["report", str(run_dir), "--format", "html", "--out", str(out)]) == 0
    dom = _dom(out / "conversations.html", tmp_path)
    assert "<script" not in dom.lower() and "<img" not in dom and "owned</title>" not in dom
    assert '&lt;script&gt;document.title="owned"&lt;/script&gt;' in dom
    assert dom.count('<details class="episode"') == 1
