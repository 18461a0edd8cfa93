"""The built book's pages as a reader's browser runs them: every page of ``_toc.yml`` opened from disk in headless
Chromium (Debian's, driven by Playwright), its console errors and failed requests listed; on a page with an
explorer, each control moved and the picture shown checked to change with it, at window widths from 800 to 1600
px, where every slider must keep a usable track. Exits 1 if any page fails.

    jupyter-book build . && python scripts/check_pages.py
    python scripts/check_pages.py --html /tmp/other/_build/html --pages book/sudden_drop

Needs Debian's ``chromium`` and ``pip install playwright`` (no browser download: it drives that Chromium).
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from matcomp.arguments import Parser

try:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
except ImportError:  # main says what to install
    PlaywrightTimeout = TimeoutError

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run"]
# the theme's layouts from 800 px: the sidebar hidden (a 720 px widget area), the narrowest column (1200 px, where the
# sidebar appears: 608 px; 672 px at 1280) and the widest (774 px from 1600)
WIDTHS = (800, 1200, 1600)
MIN_TRACK_PX = 100  # a slider narrower than this cannot be dragged to a chosen position
SETTLE_MS = 1500  # a page is watched this long after its load at least: the widget manager renders after load
RENDER_MS = 10_000  # the longest wait for an explorer to be drawn after its page loads
ANSWER_MS = 3_000  # the longest wait for the picture to follow a control
BURST = 12  # key presses in a row on each slider, faster than a picture is drawn: a reader holding an arrow key


def toc_pages() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return [toc["root"]] + [c["file"] for part in toc["parts"] for c in part["chapters"]]


# the source of the explorer's picture the reader sees (the visible image of the widget area), and the width of
# every slider's track, as functions of the page's scripts
SHOWN_JS = """const shown = () => {
    const seen = [...document.querySelectorAll('.jupyter-widgets img')].filter(i => i.offsetParent !== null);
    return seen.length === 1 ? seen[0].src.slice(-200) : `${seen.length} pictures visible`; };"""
TRACKS_JS = """const tracks = () => [...document.querySelectorAll('.widget-slider .slider-container')]
    .map(t => t.getBoundingClientRect().width);"""


def shown_picture(page) -> str:
    """The source of the explorer's picture the reader sees."""
    return page.evaluate(f"() => {{ {SHOWN_JS} return shown(); }}")


def picture_changes(page, before: str) -> str:
    """The picture shown once it differs from ``before``, waiting up to ``ANSWER_MS`` for the explorer to answer
    (``before`` itself where it never does)."""
    try:
        page.wait_for_function(f"before => {{ {SHOWN_JS} return shown() !== before; }}", arg=before,
                               timeout=ANSWER_MS, polling=50)
    except PlaywrightTimeout:
        return before
    return shown_picture(page)


def check_controls(page, name: str, width: int) -> list[str]:
    """Move every slider and dropdown of the explorer once; the picture must change each time, and every slider
    keep a track of at least ``MIN_TRACK_PX``. Then move each slider ``BURST`` times in a row, back and forth, as a
    held key does (a picture container that redraws on each change logged a console error there)."""
    problems = []
    tracks = page.evaluate(f"() => {{ {TRACKS_JS} return tracks(); }}")
    if any(w < MIN_TRACK_PX for w in tracks):
        problems.append(f"{name} at {width} px: slider tracks {[round(w) for w in tracks]} px wide")
    before = shown_picture(page)
    if " pictures visible" in before:
        return problems + [f"{name} at {width} px: {before}"]
    for index in range(page.locator(".widget-slider .noUi-handle").count()):
        handle = page.locator(".widget-slider .noUi-handle").nth(index)
        handle.focus()
        at_end = handle.get_attribute("aria-valuenow") == handle.get_attribute("aria-valuemax")
        handle.press("ArrowLeft" if at_end else "ArrowRight")  # a step the slider can take
        after = picture_changes(page, before)
        if after == before:
            problems.append(f"{name} at {width} px: moving slider {index} left the picture as it was")
        before = after
    for index in range(page.locator(".widget-dropdown select").count()):
        select = page.locator(".widget-dropdown select").nth(index)
        options = select.locator("option").all_text_contents()
        chosen = options[-1] if select.evaluate("s => s.options[s.selectedIndex].text") != options[-1] else options[0]
        select.select_option(label=chosen)
        after = picture_changes(page, before)
        if after == before:
            problems.append(f"{name} at {width} px: choosing {chosen!r} left the picture as it was")
        before = after
    handles = page.locator(".widget-slider .noUi-handle")
    for index in range(handles.count()):
        for press in range(BURST):
            handles.nth(index).press("ArrowLeft" if press < BURST // 2 else "ArrowRight")
    return problems  # what the bursts set off is logged while the tab stays open (check_pages closes it last)


def rendered(page) -> None:
    """Wait (at most ``RENDER_MS``) until the widget manager has drawn the explorer: one picture shown and every
    slider laid out with its track; what is still wrong after that is for ``check_controls`` to report."""
    try:
        page.wait_for_function(f"""() => {{ {SHOWN_JS} {TRACKS_JS}
            return !shown().endsWith(' pictures visible') && tracks().length > 0
                   && tracks().every(w => w >= {MIN_TRACK_PX}); }}""", timeout=RENDER_MS, polling=50)
    except PlaywrightTimeout:
        pass


def open_page(browser, html: Path, name: str, problems: list[str], width: int = WIDTHS[0]) -> tuple:
    """Page ``name`` loaded in a tab of its own ``width`` px wide, its console errors, page errors and failed
    requests noted in ``problems`` until ``close_page``; the tab and its listeners."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    listeners = {"console": lambda m: problems.append(f"{name}: console {m.type}: {m.text[:300]}")
                 if m.type == "error" else None,
                 "pageerror": lambda e: problems.append(f"{name}: page error: {str(e)[:300]}"),
                 "requestfailed": lambda r: problems.append(f"{name}: failed request {r.url}")}
    for event, listener in listeners.items():
        page.on(event, listener)
    page.goto((html / f"{name}.html").as_uri(), wait_until="load")
    return page, listeners


def close_page(page, listeners: dict) -> None:
    """Close a tab of ``open_page``, its errors no longer noted first: the widget manager torn down in the middle of
    a message logs an error of the closing itself, which no reader of the page meets (a reload, as a test of each
    width once did, logged it too)."""
    for event, listener in listeners.items():
        page.remove_listener(event, listener)
    page.close()


def check_pages(browser, html: Path, names: list[str]) -> list[str]:
    """Console errors and failed requests of every page of ``names``, each left open ``SETTLE_MS`` after its load
    at least (the tabs settle together); the controls of every page with an explorer at each width, in the tab
    already open at the first and in a tab loaded at each other (a tab made wider keeps some of the layout
    of its load: a row that did not wrap kept usable tracks when widened to 1280 px, not when loaded there). Every
    tab stays open, its errors noted, until the last explorer is checked: what one's key presses set off is logged
    while the next is checked, with no wait of its own."""
    problems: dict[str, list[str]] = {name: [] for name in names}
    tabs = {name: open_page(browser, html, name, problems[name]) for name in names}
    tabs[names[-1]][0].wait_for_timeout(SETTLE_MS)  # the widget manager renders after load
    wider = []
    for name, first in tabs.items():
        for width in WIDTHS if first[0].locator(".widget-slider, .widget-dropdown").count() else ():
            tab = first if width == WIDTHS[0] else open_page(browser, html, name, problems[name], width)
            rendered(tab[0])
            problems[name] += check_controls(tab[0], name, width)
            wider += [tab] if tab is not first else []
    tabs[names[-1]][0].wait_for_timeout(ANSWER_MS // 3)  # what the last explorer's key presses set off, logged
    for tab in [*tabs.values(), *wider]:  # every tab watched until every explorer is checked
        close_page(*tab)
    return [problem for found in problems.values() for problem in sorted(set(found), key=found.index)]


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="scripts/check_pages.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--html", type=Path, default=ROOT / "_build" / "html", help="the built book's html folder")
    parser.add_argument("--pages", nargs="+", default=None, help="pages to check (default: every page of _toc.yml)")
    args = parser.parse_args(argv)
    pages = args.pages or toc_pages()
    args.html = args.html.resolve()  # a page opens by its file URI, which a relative path has none of
    missing = [name for name in pages if not (args.html / f"{name}.html").is_file()]
    if missing:
        parser.error(f"{args.html} holds no page {', '.join(missing)}: build the book first (jupyter-book build .)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        parser.error("needs Playwright: pip install playwright (it drives Debian's chromium; no download)")
    if not Path(CHROMIUM).exists():
        parser.error(f"needs Debian's Chromium at {CHROMIUM}: apt-get install chromium")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        problems = check_pages(browser, args.html, pages)
        browser.close()
    print("\n".join(problems) or f"{len(pages)} pages: no console error, no failed request, every control answers")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
