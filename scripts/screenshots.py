"""Screenshots of the built book's pages in headless Chromium, cut into screen-sized tiles, to look at
plots, tables and widgets as a reader sees them (offline: the pages are opened from disk).

    jupyter-book build . && python scripts/screenshots.py            # every page of _toc.yml
    python scripts/screenshots.py --pages book/sudden_drop --height 9000

Needs Debian's ``chromium`` (``apt-get install chromium``). Tiles go to ``_build/screenshots/``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import yaml
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]
BLANK_ROWS = 400


def toc_pages() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return [toc["root"]] + [c["file"] for part in toc.get("parts", []) for c in part["chapters"]]


def screenshot(page: Path, out: Path, width: int, height: int, wait_ms: int) -> Path:
    """A ``width`` x ``height`` screenshot of ``page`` after ``wait_ms`` of (virtual) script time."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise SystemExit("chromium is not installed (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([browser, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}",
                        f"--virtual-time-budget={wait_ms}", f"--screenshot={out}", page.as_uri()],
                       check=True, capture_output=True, timeout=300)
    return out


def tiles(image_path: Path, tile_height: int) -> list[Path]:
    """Cut a tall screenshot into tiles, dropping the blank bottom of the page: the page is as tall
    as the window, so the content ends where the main column (right of the navigation sidebar) turns
    blank for ``BLANK_ROWS`` rows before the footer."""
    image = Image.open(image_path).convert("RGB")
    main = np.asarray(image.crop((image.width // 4, 0, image.width, image.height)).convert("L"))
    filled = (main < 250).any(axis=1)
    bottom, blank = image.height, 0
    for row, has_content in enumerate(filled):
        blank = 0 if has_content else blank + 1
        if blank == BLANK_ROWS:
            bottom = row - BLANK_ROWS + 1
            break
    paths = []
    for i, top in enumerate(range(0, bottom, tile_height)):
        path = image_path.with_name(f"{image_path.stem}-{i + 1}.png")
        image.crop((0, top, image.width, min(top + tile_height, bottom))).save(path)
        paths.append(path)
    image_path.unlink()
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", type=Path, default=ROOT / "_build" / "html", help="the built HTML folder")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "screenshots")
    parser.add_argument("--pages", nargs="*", help="pages as in _toc.yml (default: all)")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=12000, help="window height: the longest page's length")
    parser.add_argument("--tile", type=int, default=1400, help="tile height in pixels")
    parser.add_argument("--wait-ms", type=int, default=15000, help="time for scripts (MathJax, widgets)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.pages or toc_pages():
        page = args.build / f"{name}.html"
        if not page.exists():
            raise SystemExit(f"{page} does not exist: build the book first (jupyter-book build .)")
        shot = screenshot(page, args.out / f"{name.replace('/', '_')}.png", args.width, args.height, args.wait_ms)
        print(name, "->", ", ".join(p.name for p in tiles(shot, args.tile)))


if __name__ == "__main__":
    main()
