"""report.html renders in a real browser: headless Chromium screenshots it, and it is not blank.

Chromium loads the page from disk (file://), as a reviewer opening a CI artifact would, so
the relative PNG links, the CSS and the HTML must all work without a server.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib", reason="reports need the report extra: pip install 'pytest-rlgate[report]'")
from PIL import Image
from report_fixtures import make_run

from pytest_rlgate.cli import main
from pytest_rlgate.report import write_index, write_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless Chromium not found; install it with `apt-get install -y chromium` (Debian) to check "
           "that report.html renders",
)


def _screenshot(page: Path, out: Path, tmp_path: Path, size: tuple[int, int]) -> np.ndarray:
    """Render ``page`` at ``size`` (width, height) and return the screenshot's RGB pixels."""
    assert CHROMIUM is not None
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
               f"--user-data-dir={tmp_path / 'chromium-profile'}", f"--window-size={size[0]},{size[1]}",
               f"--screenshot={out}", page.resolve().as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and out.is_file(), done.stderr[-2000:]
    with Image.open(out) as image:
        assert image.size == size
        return np.asarray(image.convert("RGB"), dtype=np.int16)


def _colour_count(pixels: np.ndarray, rgb: tuple[int, int, int], tolerance: int = 25) -> int:
    return int((np.abs(pixels - np.array(rgb)).max(axis=2) <= tolerance).sum())


def test_report_renders_with_its_plots(tmp_path: Path) -> None:
    page = write_report(make_run(tmp_path / "runs"))
    pixels = _screenshot(page, tmp_path / "report.png", tmp_path, (1200, 2400))
    assert pixels.std() > 25, "a blank page, or one whose plots did not load (measured: 33 with, 20 without)"
    colours = np.unique((pixels // 16).reshape(-1, 3), axis=0)  # 16 levels per channel
    assert len(colours) > 40, f"only {len(colours)} distinct colours"
    # the CSS reached the screen: the FAILED badge and the regressed verdict are #c53030
    assert _colour_count(pixels, (197, 48, 48)) > 500
    # each <img> loaded (a broken link shows an icon and alt text instead), told apart by colours
    # that only the plots use: the "after" bars and curves (#2b6cb0), the "before" bars (#a0aec0)
    # in the category plot, the reward_std band (#2b6cb0 at 15 % on white) in the curves plot
    assert _colour_count(pixels, (43, 108, 176)) > 2000
    assert _colour_count(pixels, (160, 174, 192), tolerance=6) > 2000
    assert _colour_count(pixels, (223, 233, 243), tolerance=2) > 2000


def test_index_renders(tmp_path: Path) -> None:
    make_run(tmp_path, "unbalanced")
    make_run(tmp_path, "balanced", passed=True)
    pixels = _screenshot(write_index(tmp_path), tmp_path / "index.png", tmp_path, (1200, 700))
    assert pixels.std() > 10
    assert _colour_count(pixels, (197, 48, 48)) > 200, "the FAILED badge"
    assert _colour_count(pixels, (47, 133, 90)) > 200, "the PASSED badge"


def test_the_index_is_readable_at_1280_pixels(tmp_path: Path) -> None:
    """At a laptop's 1280 px the index's curve thumbnails are a picture, not a stamp: the blue of
    the after curves spans at least 250 px of a 340 px thumbnail (about 40 px when the full prompt digest
    squeezed the table)."""
    make_run(tmp_path, "unbalanced")
    make_run(tmp_path, "balanced", passed=True)
    pixels = _screenshot(write_index(tmp_path), tmp_path / "index.png", tmp_path, (1280, 900))
    blue = (np.abs(pixels - np.array((43, 108, 176))).max(axis=2) <= 25)
    columns = np.flatnonzero(blue.any(axis=0))
    assert columns.size and columns.max() - columns.min() >= 250, "the curve thumbnails are too small to read"
    rows = np.flatnonzero(blue.any(axis=1))
    assert rows.max() - rows.min() >= 200, "two thumbnails, one under the other"


def test_a_watched_runs_report_shows_its_strip(tmp_path: Path) -> None:
    """The watch folder's page in a browser: the strip picture loaded at its own size, its regressed column,
    its moved cells and the near-black stop frame on screen."""
    from test_watch import _watch_folder

    folder = tmp_path / "watched"
    _watch_folder(folder)
    assert main(["select", str(folder)]) == 0
    pixels = _screenshot(write_report(folder), tmp_path / "watch.png", tmp_path, (1200, 1400))
    assert _colour_count(pixels, (197, 48, 48), tolerance=12) > 2000, "the regressed column (#c53030)"
    assert _colour_count(pixels, (47, 133, 90), tolerance=12) > 1000, "the moved cells (#2f855a)"
    assert _colour_count(pixels, (26, 32, 44), tolerance=12) > 300, "the stop frame (#1a202c)"
