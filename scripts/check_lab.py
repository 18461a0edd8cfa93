"""A chapter as a reader runs it in JupyterLab: a JupyterLab server started on a copy of the chapter (so nothing
it saves reaches ``book/``), opened in headless Chromium (Debian's, driven by Playwright), "Run All Cells" from
the menu, then read as the reader sees it: every markdown cell rendered by ``jupyterlab-myst`` with its quoted
values (``{eval}``) filled in, no raw role, no unknown directive, no error in a cell; where the chapter has an
explorer, a slider moved and the picture seen to change (the live kernel redraws it). Exits 1 on any problem.

    python scripts/check_lab.py                        # book/sudden_drop.ipynb at $MATCOMP_PRESET (cpu if unset)
    MATCOMP_PRESET=smoke python scripts/check_lab.py --chapter book/task.ipynb --expect "r/9"

Needs Debian's ``chromium`` and Playwright (``requirements.txt``).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from matcomp.arguments import Parser

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
RAW = ("{eval}", "{glue", "{doc}", "{numref}", "{number}", "Unknown Directive", "Unknown Role", "NameError", "```")
SETTINGS = {  # every cell in the page (no windowing: the checks read them all); no news prompt over the page
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false"},
}
TOKEN = "check-lab"
POLL_MS = 250  # how often the page is read while cells run and expressions are answered
STABLE_MS = 1000  # the rendered prose unchanged this long: every expression answered


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_lab(folder: Path, settings: Path, port: int, log: Path) -> subprocess.Popen:
    """A JupyterLab server on ``folder``, its kernels inheriting this process's environment (the preset, the run
    store); returns once it answers."""
    for name, values in SETTINGS.items():
        path = settings / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "lib"), os.environ.get("PYTHONPATH")]))}
    server = subprocess.Popen([sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}",
                               f"--ServerApp.root_dir={folder}", f"--IdentityProvider.token={TOKEN}",
                               "--ServerApp.allow_root=True", f"--LabApp.user_settings_dir={settings}",
                               f"--LabApp.workspaces_dir={settings / 'workspaces'}"],
                              stdout=log.open("w"), stderr=subprocess.STDOUT, env=env)
    for _ in range(120):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={TOKEN}", timeout=2)
            return server
        except OSError:
            if server.poll() is not None:
                raise RuntimeError(f"JupyterLab exited: {log.read_text()[-2000:]}") from None
            time.sleep(0.5)
    server.terminate()
    raise RuntimeError(f"JupyterLab did not answer in 60 s: {log.read_text()[-2000:]}")


def run_all(page, timeout_s: float) -> list[str]:
    """Run every cell from the menu; wait until each code cell has its execution count. Returns the errors shown."""
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        prompts = page.locator(".jp-CodeCell .jp-InputPrompt").all_inner_texts()
        if prompts and all(p.strip().strip("[]:").isdigit() for p in prompts):
            break
        if page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr'] .ansi-red-fg,"
                        " .jp-RenderedText[data-mime-type='application/vnd.jupyter.error']").count():
            break
        page.wait_for_timeout(POLL_MS)
    else:
        waiting = [p for p in page.locator(".jp-CodeCell .jp-InputPrompt").all_inner_texts()
                   if not p.strip("[]: ").isdigit()]
        return [f"the cells did not finish in {timeout_s:.0f} s ({len(waiting)} prompts not numbered: {waiting[:5]})"]
    errors = page.locator(".jp-RenderedText[data-mime-type='application/vnd.jupyter.error']").all_inner_texts()
    return [f"a cell failed: {e[-500:]}" for e in errors]


def settled_prose(page, expected: list[str], timeout_s: float = 15) -> str:
    """The text of the rendered markdown once the kernel has answered its expressions, which it does after the last
    code cell: once it shows every ``expected`` text and has not changed for ``STABLE_MS`` (at most ``timeout_s``;
    what is missing then is for the caller to report)."""
    deadline = time.monotonic() + timeout_s
    prose, since = None, time.monotonic()
    while time.monotonic() < deadline:
        now = "\n".join(page.locator(".jp-MarkdownCell .lm-Widget.myst").all_inner_texts())
        if now != prose:
            prose, since = now, time.monotonic()
        elif all(text in prose for text in expected) and time.monotonic() - since >= STABLE_MS / 1000:
            break
        page.wait_for_timeout(POLL_MS)
    return prose


def shown_picture(page) -> str:
    return page.evaluate("""() => {
        const seen = [...document.querySelectorAll('.jupyter-widgets img, .jp-OutputArea-output img')]
            .filter(i => i.offsetParent !== null && i.closest('.widget-box, .jupyter-widgets'));
        return seen.map(i => i.src.slice(-200)).join('|'); }""")


def move_slider(page, timeout_s: float = 30) -> list[str]:
    """Move the explorer's first slider one position; the picture must change (the live kernel redraws it)."""
    handles = page.locator(".widget-slider .noUi-handle")
    if not handles.count():
        return []
    before = shown_picture(page)
    handles.first.scroll_into_view_if_needed()
    handles.first.focus()
    handles.first.press("ArrowLeft")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        page.wait_for_timeout(POLL_MS)
        if shown_picture(page) not in ("", before):
            return []
    return [f"moving the explorer's slider left its picture as it was for {timeout_s:.0f} s"]


def check_chapter(chapter: Path, expected: list[str], timeout_s: float,
                  screenshot: Path | None = None) -> tuple[list[str], str]:
    """Problems seen running ``chapter`` in JupyterLab, and the text of its rendered markdown."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "book").mkdir()
        shutil.copy(chapter, work / "book" / chapter.name)
        port = free_port()
        server = start_lab(work / "book", work / "settings", port, work / "lab.log")
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.goto(f"http://127.0.0.1:{port}/lab/tree/{chapter.name}?token={TOKEN}")
                page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
                page.wait_for_function("() => [...document.querySelectorAll('.jp-StatusBar-TextItem')]"
                                       ".some(e => e.textContent.includes('| Idle'))", timeout=90_000)
                page.wait_for_timeout(1000)
                problems = run_all(page, timeout_s)
                prose = settled_prose(page, expected)
                if not prose.strip():
                    problems.append("no rendered markdown found (is jupyterlab-myst installed and enabled?)")
                problems += [f"the rendered prose shows {raw!r}" for raw in RAW if raw in prose]
                problems += [f"the rendered prose lacks {text!r}" for text in expected if text not in prose]
                if not problems:
                    problems += move_slider(page)
                if screenshot:
                    page.screenshot(path=screenshot, full_page=True)
                browser.close()
        finally:
            server.terminate()
            server.wait(timeout=30)
    return problems, prose


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="scripts/check_lab.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--chapter", type=Path, default=ROOT / "book" / "sudden_drop.ipynb", help="the notebook")
    parser.add_argument("--expect", nargs="*", default=[], help="texts the rendered prose must show")
    parser.add_argument("--timeout", type=float, default=600, help="seconds the cells may take")
    parser.add_argument("--screenshot", type=Path, help="save the page as it ends here (PNG)")
    args = parser.parse_args(argv)
    if not args.chapter.is_file():
        parser.error(f"no notebook {args.chapter}")
    if not Path(CHROMIUM).exists():
        parser.error(f"needs Debian's Chromium at {CHROMIUM}: apt-get install chromium")
    problems, _ = check_chapter(args.chapter, args.expect, args.timeout, args.screenshot)
    print("\n".join(problems) or f"{args.chapter.name} in JupyterLab: every cell ran, its prose shows its values "
                                  "and no raw role, its explorer answers")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
