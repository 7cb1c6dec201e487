"""report.html in a real browser: headless Chromium renders the page, the DOM holds figures and tables.

Skipped when no Chromium is installed (Debian: apt-get install chromium).
"""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest

from promptgrid.matrix.report import build_report

_CHROMIUM = next(
    (
        p
        for p in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser"))
        if p and Path(p).exists()
    ),
    None,
)
pytestmark = pytest.mark.skipif(_CHROMIUM is None, reason="chromium is not installed")

_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _chromium(args: list[str], tmp: Path) -> subprocess.CompletedProcess[str]:
    assert _CHROMIUM is not None
    return subprocess.run(
        [_CHROMIUM, *_FLAGS, f"--user-data-dir={tmp / 'profile'}", *args], capture_output=True, text=True, timeout=180
    )


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory, bfcl_rows: list[dict[str, Any]]) -> Path:
    out = tmp_path_factory.mktemp("html")
    build_report(bfcl_rows, out, baseline=None, formats={"html"}, n_resamples=500)
    return out / "report.html"


def test_dom_has_figures_and_tables(page: Path, tmp_path: Path) -> None:
    proc = _chromium(["--dump-dom", page.as_uri()], tmp_path)
    dom = proc.stdout
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert dom.count("<img") >= 3 and 'src="data:image/png;base64,' in dom
    assert dom.count("<table>") >= 5 and "json-&gt;python,False (baseline)" in dom
    assert 'id="summary"' in dom and "Format-sensitivity report" in dom


def test_screenshot_is_a_rendered_page(page: Path, tmp_path: Path) -> None:
    shot = tmp_path / "page.png"
    proc = _chromium([f"--screenshot={shot}", "--window-size=1400,4000", page.as_uri()], tmp_path)
    assert proc.returncode == 0 and shot.exists(), proc.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1400, 4000)
    # A blank or error page compresses to a few KB; a page with text, tables and a heatmap does not.
    assert len(data) > 150_000
    image = pytest.importorskip("matplotlib.image")
    pixels = image.imread(str(shot))
    colours = {tuple((pixels[y, x, :3] * 255).astype(int)) for y in range(0, 4000, 7) for x in range(0, 1400, 7)}
    assert len(colours) > 200  # text, table stripes and the viridis heatmap, not a blank page
