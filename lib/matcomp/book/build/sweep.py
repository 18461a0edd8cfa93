"""Running a chapter over a grid of its parameters with papermill, and collecting what it records.

A chapter records the numbers a sweep should collect with ``record(**values)``: one JSON output
marked as a matcomp result. ``run_sweep`` executes the chapter once per grid point into an output
folder (runs it trains land in the run store as usual, so a point whose runs exist only loads them,
and a point whose output notebook is already there is skipped); ``collect`` reads the output
notebooks back into one table, a row per notebook: its parameters (and the environment variables that changed its
configs, where set), then its recorded values.
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import nbformat
import pandas as pd

RESULT_MIME = "application/json"
RESULT_KEY = "matcomp_result"  # output metadata key that marks a recorded result
# MyST-NB's glue convention: an output whose metadata names it in "scrapbook" and whose mime types carry
# this prefix is data, not display, and never rendered; the book's readers do not see what a sweep collects
HIDDEN_PREFIX = "application/papermill.record/"
_recorded = itertools.count()


def record(**values) -> None:
    """Store ``values`` (JSON-serialisable) as this notebook's result for ``collect``, invisibly."""
    from IPython.display import display

    text = json.dumps(values)  # fails here, naming the offending value, rather than in the sweep
    name = f"{RESULT_KEY}_{next(_recorded)}"  # glue names must be unique within a notebook
    display({HIDDEN_PREFIX + RESULT_MIME: text}, raw=True,  # a prefixed mime type holds text (nbformat)
            metadata={RESULT_KEY: True, "scrapbook": {"name": name, "mime_prefix": HIDDEN_PREFIX}})


def grid(**axes: list) -> list[dict]:
    """Every combination of the parameter values, in order (the last axis varies fastest).

    >>> grid(seed=[0, 1], overrides=["model.layers=2"])
    [{'seed': 0, 'overrides': 'model.layers=2'}, {'seed': 1, 'overrides': 'model.layers=2'}]
    """
    for name, values in axes.items():
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__") or not list(values):
            raise ValueError(f"sweep parameter {name!r} needs a non-empty list of values; got {values!r}")
    return [dict(zip(axes, combo)) for combo in itertools.product(*(list(v) for v in axes.values()))]


def notebook_parameters(notebook: Path | str) -> dict:
    """The default values of a notebook's ``parameters`` cell (its assignments of literals): the names a
    chapter takes, and what it does without them."""
    try:
        cells = json.loads(Path(notebook).read_bytes())["cells"]
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"{notebook} is not a Jupyter notebook (no JSON with cells): name a chapter, e.g. "
                         f"book/sudden_drop.ipynb") from None
    except OSError as err:
        raise ValueError(f"{notebook} cannot be read ({err.strerror})") from None
    cell = next((c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])), None)
    if cell is None:
        raise ValueError(f"{notebook} has no cell tagged 'parameters': papermill cannot parameterise it")
    return {name: ast.literal_eval(value) for name, (_, value) in _assignments(cell).items()}


def notebook_annotations(notebook: Path | str) -> dict[str, str]:
    """The types a notebook's ``parameters`` cell annotates its parameters with (name -> the annotation's text),
    which ``papermill --help-notebook`` shows."""
    cells = json.loads(Path(notebook).read_bytes())["cells"]
    cell = next(c for c in cells if "parameters" in c.get("metadata", {}).get("tags", []))
    return {name: ast.unparse(annotation) for name, (annotation, _) in _assignments(cell).items() if annotation}


def _assignments(cell: dict) -> dict[str, tuple[ast.expr | None, ast.expr]]:
    """A code cell's top-level assignments to a name: name -> its annotation (None where it has none) and value."""
    found: dict[str, tuple[ast.expr | None, ast.expr]] = {}
    for node in ast.parse("".join(cell["source"])).body:
        if isinstance(node, ast.Assign):
            found.update({target.id: (None, node.value) for target in node.targets if isinstance(target, ast.Name)})
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            found[node.target.id] = (node.annotation, node.value)
    return found


def check_points(notebook: Path, points: list[dict]) -> None:
    """Before any point runs, a ValueError naming a parameter the chapter does not have, or a point whose values
    the chapter would refuse: a chapter of the book through its declaration (``ChapterSpec.parameters_of``: its
    names and its fields' rules), another notebook by its ``parameters`` cell's names alone; and a point whose
    preset, seed, overrides or model it would refuse (``matcomp.book.chapter``)."""
    from matcomp.book.chapter import chapter_config, model_preset
    from matcomp.book.chapters import CHAPTERS, chapter_spec

    spec = chapter_spec(notebook.stem) if notebook.stem in CHAPTERS else None
    known = spec.defaults() if spec is not None else notebook_parameters(notebook)
    unknown = sorted({name for point in points for name in point} - set(known))
    if unknown:
        raise ValueError(f"{notebook.name} has no parameter {', '.join(map(repr, unknown))}; its parameters: "
                         f"{', '.join(known)}")
    for point in points:
        try:
            if spec is not None:  # a chapter's points are held to what its first cell checks
                spec.parameters_of(point)
            chapter_config(point.get("preset"), point.get("seed"), point.get("overrides"))
            if "one_model" in known:
                model_preset(point.get("preset"), point.get("one_model"))
        except (ValueError, TypeError) as err:
            raise ValueError(f"sweep point {point}: {err}") from None


def config_environment() -> dict[str, str]:
    """The environment variables set here that change the configs a chapter resolves (``matcomp.presets``): part
    of a sweep point's identity, so a point run under another ``$MATCOMP_SET`` is never taken for this one."""
    from matcomp.presets import ENV_PRESET, ENV_SEED, ENV_SET

    return {name: os.environ[name].strip() for name in (ENV_PRESET, ENV_SEED, ENV_SET)
            if os.environ.get(name, "").strip()}


def point_name(notebook: Path, params: dict, environment: dict | None = None) -> str:
    """The output file name of one grid point: the chapter's name and a short hash of its parameters and of the
    ``environment`` that changes its configs (``config_environment``; none set: the hash of the parameters
    alone, as before)."""
    identity = {**params, "environment": environment} if environment else params
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:10]
    return f"{notebook.stem}-{digest}.ipynb"


def run_sweep(notebook: Path | str, points: list[dict], out: Path | str, fixed: dict | None = None,
              kernel: str = "python3", progress: bool = False, workers: int = 1,
              address: str | None = None) -> list[Path]:
    """Execute ``notebook`` once per parameter dict in ``points`` (each merged over ``fixed``) into
    ``out``; returns the output notebooks. A point whose output exists (from a finished execution) is
    not run again; a failed point raises papermill's error naming the cell, after the others ran. With
    ``progress``, a line says how many points there are, and another each point as it finishes.

    With ``workers`` > 1 or a Ray cluster's ``address``, the points run as Ray tasks, each in a
    worker process of its own (papermill changes the working directory, so points never share a
    process), on an embedded instance of ``workers`` CPUs or on the cluster."""
    if not str(out).strip():
        raise ValueError("--out is empty (an unset shell variable?): name a folder for the executed notebooks")
    notebook, out = Path(notebook).resolve(), Path(out)
    if not notebook.exists():
        raise ValueError(f"notebook {notebook} does not exist")
    if workers < 1:
        raise ValueError(f"workers must be >= 1; got {workers}")
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file; name a folder for the executed notebooks")
    environment, targets = config_environment(), {}
    for point in points:
        params = {**(fixed or {}), **point}
        targets[out / point_name(notebook, params, environment)] = params
    check_points(notebook, list(targets.values()))
    # torch comes with the store: a kernel that only records never pays for it
    from matcomp.runs.store import absolute_store, writable_store

    absolute_store()  # the points run inside the notebook's folder: one store for all
    writable_store(out, "--out")
    if address:
        from matcomp.runs.parallel import check_resources

        check_resources(address)  # before Ray retries an address where nothing answers
    todo = [(target, params) for target, params in targets.items() if not target.exists()]
    if progress:
        print(f"{notebook.name}: {len(targets)} points into {out}, {len(targets) - len(todo)} done already", flush=True)
    failures = []
    outcomes = _executed(notebook, todo, kernel, environment, workers, address)
    for number, (params, (failure, seconds)) in enumerate(outcomes, 1):
        if progress:
            print(f"point {number} of {len(todo)} finished: {params}, {'failed' if failure else 'done'} in "
                  f"{seconds:.0f} s", flush=True)
        failures += [failure] if failure else []
    if failures:
        raise RuntimeError(f"{len(failures)} of {len(points)} sweep points failed (their partial outputs "
                           f"are in {out}):\n" + "\n".join(failures))
    return list(targets)


def _executed(notebook: Path, todo: list[tuple[Path, dict]], kernel: str, environment: dict, workers: int,
              address: str | None) -> Iterator[tuple[dict, tuple[str | None, float]]]:
    """Each point of ``todo`` (target, parameters) with its ``execute_point`` outcome, as each finishes: one by one
    here, or as Ray tasks (``run_sweep``)."""
    if workers == 1 and not address:
        for target, params in todo:
            yield params, execute_point(notebook, target, params, kernel, environment)
        return
    from matcomp.runs.parallel import start_ray

    ray = start_ray(address, num_cpus=workers)
    task = ray.remote(num_cpus=1)(execute_point)
    pending = {task.remote(str(notebook), str(target), params, kernel, environment): params for target, params in todo}
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        yield pending.pop(done[0]), ray.get(done[0])


def execute_point(notebook: Path | str, target: Path | str, params: dict, kernel: str,
                  environment: dict | None = None) -> tuple[str | None, float]:
    """Execute one grid point into ``target`` (via a partial file, so only a finished execution takes
    the point's name), noting in its metadata the ``environment`` that changed its configs; returns what failed
    (None: nothing) and the seconds it took."""
    import papermill

    notebook, target = Path(notebook), Path(target)
    partial, started = target.with_suffix(".running.ipynb"), time.monotonic()
    try:
        with stderr_to(target.with_suffix(".log")):  # the kernel's own warnings: kept, not shown
            papermill.execute_notebook(notebook, partial, parameters=params, kernel_name=kernel,
                                       cwd=str(notebook.parent), progress_bar=False)
    except papermill.PapermillExecutionError as error:
        return f"{params}: {error.ename}: {error.evalue}", time.monotonic() - started
    if environment:
        executed = nbformat.read(partial, as_version=4)
        executed.metadata[RESULT_KEY] = {"environment": environment}
        nbformat.write(executed, partial)
    os.replace(partial, target)
    return None, time.monotonic() - started


@contextmanager
def stderr_to(path: Path) -> Iterator[None]:
    """Within the block, this process's file descriptor 2 (inherited by the kernels it starts) writes
    to ``path``: a sweep run from inside a chapter shows its readers no kernel start-up warnings."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(path, "ab") as log:
            os.dup2(log.fileno(), 2)
            yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def collect(out: Path | str, notebooks: list[Path] | None = None) -> pd.DataFrame:
    """One row per output notebook (``notebooks`` in their order, else every finished one in ``out``):
    its papermill parameters, then its recorded values."""
    rows = []
    if notebooks is None:
        notebooks = sorted(p for p in Path(out).glob("*.ipynb") if not p.name.endswith(".running.ipynb"))
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        row = {"notebook": path.name, **nb.metadata.get("papermill", {}).get("parameters", {}),
               **nb.metadata.get(RESULT_KEY, {}).get("environment", {})}
        for cell in nb.cells:
            for output in cell.get("outputs", []):
                if output.get("metadata", {}).get(RESULT_KEY):
                    data = output["data"]  # hidden glue data, or a visible JSON output of an older sweep
                    row.update(json.loads(data[HIDDEN_PREFIX + RESULT_MIME]) if HIDDEN_PREFIX + RESULT_MIME in data
                               else data[RESULT_MIME])
        rows.append(row)
    if not rows:
        raise ValueError(f"no executed notebooks in {out}")
    return pd.DataFrame(rows)
