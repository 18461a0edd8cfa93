"""The chapters the book's build has just executed, for the tests that would execute them again with the same
inputs to read instead (``tests/test_default_scale.py``: the one-model chapters and the width/depth chapter at the
default scale, which the default build executes as they do; ``tests/test_book.py``: every chapter).

The build's notebook cache (jupyter-cache) matches a notebook by its code alone, so a cached execution says
nothing of the library, the shipped runs or the environment it ran with. When ``matcomp.book.build.parallel_build``
executes a chapter it therefore records beside the cache the fingerprint of those inputs (``inputs_fingerprint``:
every source file of the library, every shipped run's seal and table, the preset, seed and overrides the
environment sets, the versions of the packages that compute), and what the execution changed in the repository
(``git status``); a test reads a cached execution only where that fingerprint is still the current one, and
executes the chapter itself otherwise (as in CI, which builds nothing first). ``tests/test_book.py`` renders the
book from the executions of a build that executed every chapter so, where that build wrote nothing into the
repository; and where that build's own pages were rendered from today's pages and configuration and finished with
no warning (``record_render``, ``rendered_today``), it checks those pages instead of rendering them again.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import nbformat

# jupyter-book's default execution cache, in the repository (lib/matcomp/book/build/executed.py -> .); the library's
# computing modules (torch, transformers) are imported only where a fingerprint is taken or written, so a script
# that only reads a cache (scripts/compare_outputs.py) starts in a second
BUILD_CACHE = Path(__file__).resolve().parents[4] / "_build" / ".jupyter_cache"
CACHE_DB = "global.db"  # jupyter-cache's SQLite database, in its folder
STAMP = "matcomp-inputs.json"  # in the cache's folder: cached record's hash key -> its inputs' fingerprint
# in the cache's folder: cached record's hash key -> what its execution changed in the notebook's repository (the
# lines of `git status --porcelain` it added; null where git could not say)
WRITES = "matcomp-writes.json"
PACKAGES = ("torch", "transformers", "numpy", "pandas", "scikit-learn", "cvxpy", "safetensors", "pyarrow",
            "matplotlib")  # what computes and draws the outputs
RENDERED = "matcomp-rendered.json"  # in the HTML folder: the fingerprint of the pages' sources it was rendered from
RENDERERS = ("jupyter-book", "sphinx", "myst-nb", "myst-parser", "sphinx-book-theme", "ipywidgets")
PAGE_SOURCES = ("_config.yml", "_toc.yml", "book", "_static", "static")  # what the pages are rendered from


@contextmanager
def readable(cache_path: Path | str) -> Iterator[None]:
    """Within the block, a jupyter-cache whose database is damaged (not SQLite, cut short) is one line naming it
    and what to do, not SQLAlchemy's traceback."""
    from sqlalchemy.exc import DatabaseError

    try:
        yield
    except (DatabaseError, sqlite3.DatabaseError) as err:
        reason = str(getattr(err, "orig", None) or err).splitlines()[0]
        raise ValueError(f"{Path(cache_path) / CACHE_DB} is damaged ({reason}): delete {cache_path} and build the "
                         f"book again (jupyter-book build .)") from None


@dataclass(frozen=True)
class Execution:
    """A notebook's latest execution in a jupyter-cache: its record's hash key, when it was cached, and how many
    seconds it ran (None where the record does not say)."""

    hashkey: str
    created: str
    seconds: float | None


def executions(cache_path: Path | str) -> dict[str, Execution]:
    """Each notebook's latest execution in the jupyter-cache at ``cache_path``, by file name, read without writing
    into the cache (jupyter-cache's own reads create a missing database and mark every record they read)."""
    db = Path(cache_path) / CACHE_DB
    if not db.is_file():
        return {}
    with readable(cache_path), closing(sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)) as con:
        rows = con.execute("SELECT uri, hashkey, created, data FROM nbcache ORDER BY created").fetchall()
    return {Path(uri).name: Execution(key, created, json.loads(data or "{}").get("execution_seconds"))
            for uri, key, created, data in rows}  # a later execution of a notebook replaces one before


def latest_executions(cache_path: Path) -> dict[str, nbformat.NotebookNode]:
    """Each notebook's latest execution in the jupyter-cache at ``cache_path`` (``executions``), its cells and
    outputs, by file name."""
    paths = {name: cache_path / "executed" / run.hashkey / "base.ipynb" for name, run in executions(cache_path).items()}
    return {name: nbformat.read(path, as_version=4) for name, path in paths.items() if path.is_file()}


def inputs_fingerprint() -> str:
    """The SHA-256 of what a chapter's outputs depend on beyond its own code: the library's source, the shipped
    runs' seals (each lists the SHA-256 of every file of its run) and their tables, the preset, seed and
    overrides the environment sets, and the versions of the computing packages."""
    from matcomp.presets import ENV_SEED, ENV_SET, preset_name
    from matcomp.runs.shipped import REFERENCE_ROOT, REPO

    digest = hashlib.sha256()
    files = sorted((REPO / "lib" / "matcomp").rglob("*.py")) + sorted(
        p for p in REFERENCE_ROOT.rglob("*") if p.suffix in (".json", ".csv") and p.is_file())
    for path in files:
        digest.update(path.relative_to(REPO).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    settings = {"preset": preset_name(), **{name: os.environ.get(name, "") for name in (ENV_SEED, ENV_SET)},
                **{package: version(package) for package in PACKAGES}, "python": sys.version}
    digest.update(json.dumps(settings, sort_keys=True).encode())
    return digest.hexdigest()


def pages_fingerprint(root: Path) -> str:
    """The SHA-256 of what a build's pages are rendered from beyond the chapters' executions: every file of the book's
    pages, configuration and static files under ``root`` (``PAGE_SOURCES``), the versions of the packages that render
    them, and the chapters' inputs (``inputs_fingerprint``)."""
    digest = hashlib.sha256()
    for name in PAGE_SOURCES:
        top = root / name
        for path in sorted(p for p in ([top] if top.is_file() else top.rglob("*")) if p.is_file()):
            digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    versions = {package: version(package) for package in RENDERERS}
    digest.update(json.dumps({**versions, "inputs": inputs_fingerprint()}, sort_keys=True).encode())
    return digest.hexdigest()


def record_render(app, exception: Exception | None) -> None:
    """After an HTML build (Sphinx's ``build-finished``) that finished with no error and no warning, note in its
    output folder the fingerprint of what it rendered (``pages_fingerprint``); after any other, remove the note, so
    that no test takes a failed or warned build's pages for a clean one's."""
    from matcomp.runs.folder import atomic_write_bytes

    stamp = Path(app.outdir) / RENDERED
    stamp.unlink(missing_ok=True)
    clean = exception is None and getattr(app, "_warncount", None) == 0  # Sphinx counts the warnings it logged
    if clean and app.builder.name == "html":
        atomic_write_bytes(stamp, json.dumps({"pages": pages_fingerprint(Path(app.confdir))}).encode())


def rendered_today(html: Path, root: Path) -> bool:
    """Whether the pages in ``html`` are a clean build's (``record_render``) of today's pages, configuration and
    chapter inputs under ``root``."""
    stamp = html / RENDERED
    return stamp.is_file() and json.loads(stamp.read_text()).get("pages") == pages_fingerprint(root)


def repository_state(folder: Path | str) -> str | None:
    """What git sees changed or new in the repository holding ``folder`` (``git status --porcelain``, ignored files
    aside), None where git cannot say (no git, not a repository)."""
    import subprocess

    try:
        done = subprocess.run(["git", "status", "--porcelain"], cwd=folder, capture_output=True, text=True,
                              timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def changes(before: str | None, after: str | None) -> list[str] | None:
    r"""The lines of ``repository_state`` that ``after`` holds and ``before`` did not (None where either is unknown).

    >>> changes(" M README.md\n", " M README.md\n?? book/out.ipynb\n")
    ['?? book/out.ipynb']
    """
    if before is None or after is None:
        return None
    return sorted(set(after.splitlines()) - set(before.splitlines()))


def record_inputs(cache, notebooks: list[str], fingerprint: str, wrote: list[str] | None = None) -> None:
    """After the build executed ``notebooks`` into ``cache`` (a jupyter-cache), note the inputs they ran with
    beside the cache, under each one's cache record, and what their execution changed in the repository (``wrote``:
    ``changes``, None where unknown); one that failed has no record and is not noted."""
    from matcomp.runs.folder import atomic_write_bytes

    stamp_path, writes_path = Path(cache.path) / STAMP, Path(cache.path) / WRITES
    stamps = json.loads(stamp_path.read_text()) if stamp_path.exists() else {}
    writes = json.loads(writes_path.read_text()) if writes_path.exists() else {}
    for path in notebooks:
        try:
            record = cache.match_cache_notebook(nbformat.read(path, as_version=4))
        except KeyError:
            continue
        stamps[record.hashkey], writes[record.hashkey] = fingerprint, wrote
    atomic_write_bytes(writes_path, json.dumps(writes, indent=1).encode())
    atomic_write_bytes(stamp_path, json.dumps(stamps, indent=1).encode())


def build_wrote(notebook: Path, cache_path: Path = BUILD_CACHE) -> list[str] | None:
    """What the build's execution of ``notebook``'s code changed in the repository (``changes``; [] for nothing),
    None where the build did not note it (no cached execution of this code, or git could not say)."""
    writes_path = cache_path / WRITES
    if not writes_path.exists():
        return None
    from jupyter_cache import get_cache

    with readable(cache_path):
        try:
            record = get_cache(cache_path).match_cache_notebook(nbformat.read(notebook, as_version=4))
        except KeyError:
            return None
    return json.loads(writes_path.read_text()).get(record.hashkey)


def build_execution(notebook: Path, cache_path: Path = BUILD_CACHE) -> nbformat.NotebookNode | None:
    """The build's execution of ``notebook`` (its code cells with their outputs) where the build executed this
    very code with today's inputs (``inputs_fingerprint``), else None: the caller executes it."""
    stamp_path = cache_path / STAMP
    if not stamp_path.exists():
        return None
    from jupyter_cache import get_cache

    cache = get_cache(cache_path)
    with readable(cache_path):
        try:
            record = cache.match_cache_notebook(nbformat.read(notebook, as_version=4))
        except KeyError:
            return None
        if json.loads(stamp_path.read_text()).get(record.hashkey) != inputs_fingerprint():
            return None
        return cache.get_cache_bundle(record.pk).nb
