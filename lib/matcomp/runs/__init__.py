"""Training runs and where they live.

``training`` (the online Adam loop with exact resume), ``folder`` (one run's files, written
atomically), ``run`` (a finished run: metrics, drop, checkpoints), ``store`` (``get_or_train``: the
run store with its lock), ``shipped`` (the reference runs shipped in ``runs/reference/``) and
``machine`` (what a run was trained on).

May import the core modules and ``matcomp.models``; never an analysis or the book.
"""
