"""The book's build executes its chapters several at a time (a Sphinx extension, ``_config.yml``'s
``extra_extensions``). MyST-NB executes a notebook only as Sphinx reads it, one after another, and nearly all of a
build's time is that execution. Before Sphinx reads anything, this executes every chapter it is about to read
whose outputs are not cached and that MyST-NB would execute (not excluded by ``execute.exclude_patterns``), in
parallel (jupyter-cache's local-parallel executor: a kernel per core, each in the notebook's own folder, as
MyST-NB runs it) into the cache MyST-NB then reads, so each page finds its outputs there and the build executes
nothing more. A chapter that fails here is left uncached: MyST-NB executes it again and reports its error as
it always does. Beside the cache it notes the inputs each chapter ran with and what the execution changed in the
repository (``matcomp.book.build.executed``), so the tests that would execute a chapter again with the same inputs read
it instead; and, after a build with no warning, what its pages were rendered from, so the book test checks them.

Kernels get one thread each unless ``OMP_NUM_THREADS`` says otherwise (two kernels of two threads on two cores
only contend). ``MATCOMP_BUILD_SERIAL=1`` turns it off; it is off on one core, and unless the execution mode is
``cache``.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

ENV_SERIAL = "MATCOMP_BUILD_SERIAL"


def setup(app) -> dict:
    from sphinx.errors import ConfigError

    from matcomp.book.build.executed import record_render

    try:
        serial_requested()  # a bad value stops the build at once, not after the other chapters have run
    except ValueError as err:
        raise ConfigError(str(err)) from None
    app.connect("env-before-read-docs", execute_ahead)
    app.connect("build-finished", record_render)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


def serial_requested() -> bool:
    """Whether ``$MATCOMP_BUILD_SERIAL`` turns the parallel execution off: "1" does, unset, "" or "0" does not;
    anything else ("false", "yes") is a ValueError naming it, rather than a guess at what was meant."""
    value = os.environ.get(ENV_SERIAL, "").strip()
    if value not in ("", "0", "1"):
        raise ValueError(f"${ENV_SERIAL} must be 1 (execute the chapters one by one) or 0 or unset (in parallel); "
                         f"got {value!r}")
    return value == "1"


def execute_ahead(app, env, docnames: list[str]) -> None:
    """Execute the notebooks among ``docnames`` that the cache does not hold, in parallel, into the cache."""
    config = env.mystnb_config
    cores = os.cpu_count() or 1
    if config.execution_mode != "cache" or cores < 2 or serial_requested():
        return
    from jupyter_cache import get_cache
    from jupyter_cache.executors import load_executor

    excluded = config.execution_excludepatterns or ()
    notebooks = [str(path) for path in map(Path, (env.doc2path(name) for name in docnames)) if path.suffix == ".ipynb"
                 and not any(PurePosixPath(path.as_posix()).match(pattern) for pattern in excluded)]  # as MyST-NB
    if not notebooks:
        return
    from matcomp.book.build.executed import changes, inputs_fingerprint, readable, record_inputs, repository_state

    cache = get_cache(config.execution_cache_path)
    with readable(config.execution_cache_path):
        for path in notebooks:
            cache.add_nb_to_project(path)
        outdated = {record.uri for record in cache.list_unexecuted()}
    todo = [path for path in notebooks if path in outdated]
    if len(todo) < 2:
        return  # one notebook: MyST-NB executes it as it reads it
    fingerprint = inputs_fingerprint()  # what the chapters execute with, for the tests that would run them again
    before = repository_state(Path(todo[0]).parent)  # and whether they wrote into the repository
    threads = os.environ.get("OMP_NUM_THREADS")
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # jupyter-cache's pool runs a kernel on every core
    try:
        executor = load_executor("local-parallel", cache)
        executor.run_and_cache(filter_uris=todo, timeout=config.execution_timeout,
                               allow_errors=config.execution_allow_errors)
    finally:
        if threads is None:
            os.environ.pop("OMP_NUM_THREADS", None)
    if not config.execution_allow_errors:  # a chapter cached with its errors is no execution to read
        record_inputs(cache, todo, fingerprint, changes(before, repository_state(Path(todo[0]).parent)))

