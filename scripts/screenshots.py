"""Screenshots of the built book's pages in headless Chromium, cut into screen-sized tiles, to look at
plots, tables and widgets as a reader sees them (offline: the pages are opened from disk).

    jupyter-book build . && python scripts/screenshots.py            # every page of _toc.yml
    python scripts/screenshots.py --pages book/sudden_drop --height 9000

Needs Debian's ``chromium`` (``apt-get install chromium``). Tiles go to ``_build/screenshots/``.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import yaml
from PIL import Image

from matcomp.arguments import Parser, at_least

ROOT = Path(__file__).resolve().parents[1]
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]
BLANK_ROWS = 400
MAX_PIXELS = 100_000  # a window side beyond this Chromium cannot draw
MAX_WAIT_MS = 300_000  # the script time of one page; Chromium is stopped after 300 s in any case


def toc_pages() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return [toc["root"]] + [c["file"] for part in toc.get("parts", []) for c in part["chapters"]]


def chromium() -> str:
    """The browser's path, or a stop saying how to install it."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise SystemExit("chromium is not installed (Debian: apt-get install chromium)")
    return browser


def screenshot(browser: str, page: Path, out: Path, width: int, height: int, wait_ms: int) -> Path:
    """A ``width`` x ``height`` screenshot of ``page`` after ``wait_ms`` of (virtual) script time."""
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
    """Every argument is checked before Chromium starts: it hangs on a negative window size or time budget."""
    parser = Parser(prog="scripts/screenshots.py", description=__doc__.split("\n")[0])
    pixels = at_least(1, high=MAX_PIXELS)
    parser.add_argument("--build", type=Path, default=ROOT / "_build" / "html", help="the built HTML folder")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "screenshots")
    parser.add_argument("--pages", nargs="*", help="pages as in _toc.yml (default: all)")
    parser.add_argument("--width", type=pixels, default=1280)
    parser.add_argument("--height", type=pixels, default=12000, help="window height: the longest page's length")
    parser.add_argument("--tile", type=pixels, default=1400, help="tile height in pixels")
    parser.add_argument("--wait-ms", type=at_least(0, high=MAX_WAIT_MS), default=15000,
                        help="time for scripts (MathJax, widgets)")
    args = parser.parse_args()
    if args.out.exists() and not args.out.is_dir():
        parser.error(f"argument --out: {args.out} is a file, not a folder for the tiles")
    build = args.build.resolve()  # a page opens by its file URI, which a relative path has none of
    pages = {name: build / f"{name}.html" for name in args.pages or toc_pages()}
    absent = [str(page) for page in pages.values() if not page.exists()]
    if absent:
        raise SystemExit(f"{absent[0]} does not exist ({len(absent)} of {len(pages)} pages do not): build the book "
                         f"first (jupyter-book build .), or name pages as _toc.yml does")
    browser = chromium()
    args.out.mkdir(parents=True, exist_ok=True)
    for name, page in pages.items():
        shot = screenshot(browser, page, args.out / f"{name.replace('/', '_')}.png", args.width, args.height,
                          args.wait_ms)
        print(name, "->", ", ".join(p.name for p in tiles(shot, args.tile)))


if __name__ == "__main__":
    main()
