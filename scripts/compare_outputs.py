"""Compare what every chapter printed in two builds of the book, for a refactor that must not change a page.

    python scripts/compare_outputs.py BEFORE AFTER [--diff]

BEFORE and AFTER are two checkouts, each built with ``jupyter-book build`` (for an older commit: ``git worktree
add /tmp/before REV``, then build there with ``PYTHONPATH=/tmp/before/lib`` so its own library runs). Each
chapter's latest execution in the checkout's ``_build/.jupyter_cache`` is read, and nothing is written there. Its
outputs (streams, text, HTML, markdown; an image counts as one output) are compared in order, after masking what
changes on every run: pandas Styler ids, object addresses, widget model ids, and where a cell's printed text is
split into stream outputs (how the kernel's flushes fall, not what it printed). The script prints each chapter's
count of outputs that differ (with ``--diff``, the differing lines) and exits 1 if any do; a checkout whose build
executed no chapter is refused, since comparing nothing would pass.
"""

from __future__ import annotations

import difflib
import re
import sys
from pathlib import Path

from matcomp.arguments import Parser
from matcomp.book.build.executed import latest_executions

MASKS = [(re.compile(r"T_[0-9a-f]{5}"), "T_"), (re.compile(r"0x[0-9a-f]+"), "0x"),
         (re.compile(r"'model_id': '[0-9a-f]{32}'"), "'model_id': ''")]


def latest_outputs(checkout: Path) -> dict[str, list[tuple[str, str]]]:
    """Each notebook's outputs in its latest cached execution: name -> [(kind, masked text)]; a checkout whose
    build executed no chapter, or whose cache is damaged, stops with one line (nothing is written into it)."""
    if not checkout.is_dir():
        raise SystemExit(f"error: {checkout} is not a folder: give two built checkouts")
    cache_path = checkout / "_build" / ".jupyter_cache"
    try:
        executions = latest_executions(cache_path)
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None
    if not executions:
        raise SystemExit(f"error: {cache_path} holds no executed chapter: build the book in {checkout} first "
                         f"(jupyter-book build .)")
    return {name: notebook_outputs(nb) for name, nb in executions.items()}


def notebook_outputs(nb) -> list[tuple[str, str]]:
    """One executed notebook's outputs in order, (kind, masked text): a cell's consecutive outputs of one stream
    (stdout, stderr) as one (how a kernel's flushes split what a cell prints is timing, not text), an image as
    "<image>"
    (``tests/test_bad_input.py`` holds both)."""
    found: list[tuple[str, str]] = []
    for cell in nb.cells:
        previous = None  # the cell's last output so far: a stream's name, or another kind
        for output in cell.get("outputs", []):
            if "text" in output:
                stream = output.get("name", "stdout")
                if previous == stream:
                    found[-1] = ("stream", found[-1][1] + output["text"])
                else:
                    found.append(("stream", output["text"]))
                previous = stream
                continue
            for kind, value in output.get("data", {}).items():
                text = "<image>" if kind.startswith("image/") else value if isinstance(value, str) else str(value)
                for pattern, replacement in MASKS:
                    text = pattern.sub(replacement, text)
                found.append((kind, text))
                previous = kind
    return found


def main() -> None:
    parser = Parser(prog="scripts/compare_outputs.py", description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--diff", action="store_true", help="print the lines of each output that differ")
    args = parser.parse_args()
    if args.before.resolve() == args.after.resolve():
        parser.error(f"BEFORE and AFTER are the same checkout, {args.before}: compare two builds")
    before, after = latest_outputs(args.before), latest_outputs(args.after)
    differing = 0
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name, []), after.get(name, [])
        pairs = [(a, b) for a, b in zip(old, new) if a != b]
        count = len(pairs) + abs(len(old) - len(new))
        differing += count
        print(f"{name:28s} {len(old):3d} outputs before, {len(new):3d} after, {count} differ")
        if args.diff:
            for a, b in pairs:
                for line in difflib.unified_diff(a[1].splitlines(), b[1].splitlines(), lineterm="", n=0):
                    print("    " + line[:300])
    print(f"{differing} outputs differ")
    sys.exit(1 if differing else 0)


if __name__ == "__main__":
    main()
