"""Training runs and where they live.

``training`` (the online Adam loop with exact resume and a wall-clock limit), ``folder`` (one run's
files, written atomically), ``run`` (a finished run: metrics, drop, checkpoints, each file checked as it is
read), ``store`` (``get_or_train``: the run store with its lock), ``extend`` (a finished run continued to a
longer budget), ``shipped`` (the reference runs shipped in ``runs/reference/``), ``derived`` (stored
analyses keyed by their inputs), ``cost`` (a step's cost, and what a run needs of the machine), ``parallel``
(many runs on Ray), ``transfer`` (a run packed in verified parts and installed from them), ``machine``
(what a run was trained on), ``export`` (a checkpoint as a folder plain ``transformers`` loads) and ``card``
(the model card of a shipped paper-scale run, generated from its own files).

May import the core modules and ``matcomp.models``; never an analysis or the book.
"""
