"""A line for whoever started a long piece of work. In a notebook kernel the output is the page, which nobody sees
until the chapter ends (papermill, the build): so what the work says of itself also goes to the console that started
the kernel: the copy of its standard error that ipykernel keeps (``sys.stderr._original_stdstream_copy``), else the
process's own (``sys.__stderr__``), never the cell's stderr, which a built page would show (and the build warns of).
"""

from __future__ import annotations

import os
import sys


def say(text: str, page: bool = True) -> None:
    """``text`` on the output (with ``page``: a notebook shows it) and on the console: in a notebook kernel, the one
    that started it; elsewhere, without ``page``, standard error."""
    if page:
        print(text, flush=True)
    console = getattr(sys.stderr, "_original_stdstream_copy", None)
    if isinstance(console, int):
        os.write(console, (text + "\n").encode())
    elif type(sys.stderr).__module__.startswith("ipykernel"):
        if sys.__stderr__ is not None:
            print(text, file=sys.__stderr__, flush=True)
    elif not page:
        print(text, file=sys.stderr, flush=True)
