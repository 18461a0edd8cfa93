"""Chapters executed by the test command (nbmake, the book build test) run at the smoke preset,
unless MATCOMP_PRESET says otherwise; kernels inherit this environment."""

import os

os.environ.setdefault("MATCOMP_PRESET", "smoke")
