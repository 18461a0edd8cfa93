"""Derived tables: analyses of finished runs that are deterministic but slow, stored beside the runs.

A ``Derivation`` names an analysis, the checkpoints it reads, its parameters and a function that
computes its tables (a dict of name -> DataFrame). Its **key** is the SHA-256 of all it depends on: each
checkpoint's SHA-256 as its run's ``complete.json`` records it, the parameters (as JSON), the code of
every module the computation can run (``import_closure`` of the module that defines the function: the
imports of its package, followed from module to module, read from the source, none listed by hand; each
module's source without its comments, docstrings and blank lines, ``code_text``), and the versions of the
libraries whose numerics it depends on (``VERSIONED``). A changed input, line of code or library gives a
new key, so a table is recomputed rather than read stale; a reworded comment or docstring does not.

``load_or_compute(derivation)`` returns its tables from, in order:

- ``runs/reference/derived/`` (shipped with the repository; written only by ``ship``, which
  ``python -m matcomp derive`` calls), where a table whose bytes differ from its recorded SHA-256 is
  an error (``DerivedError``, one line naming ``git checkout`` to restore it);
- the working store's ``derived/`` (``$MATCOMP_RUNS/derived``), where a damaged table is recomputed;
- else it computes them and writes them to the working store (never into the repository).

On disk, one derivation is ``<name>-<key[:16]>.json`` (its manifest: the full key, what went into it,
and each table's file, index columns and SHA-256) and one CSV per table, ``<name>-<key[:16]>.<table>.csv``,
written with 17 significant digits and read back with each numeric column's recorded dtype, so a
table reads back exactly as computed (checked on every write). Writes are atomic and a file lock keeps
two processes from computing the same derivation twice.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import importlib.util
import io
import json
import sys
import tokenize
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from filelock import FileLock

from matcomp.console import say
from matcomp.runs.folder import CHECKPOINT_PATTERN, atomic_write_bytes
from matcomp.runs.run import Run
from matcomp.runs.shipped import REFERENCE_ROOT
from matcomp.runs.store import writable_store

SHIPPED_ROOT = REFERENCE_ROOT / "derived"
VERSIONED = ("torch", "numpy", "pandas", "cvxpy", "clarabel")  # libraries whose numerics a table depends on
FLOAT_FORMAT = "%.17g"  # 17 significant digits: every float64 reads back as itself
REFRESH = "python -m matcomp derive"  # the command that recomputes the shipped tables

Tables = dict[str, pd.DataFrame]


class DerivedError(RuntimeError):
    """A shipped derived table that cannot be trusted (changed since it was written)."""


@dataclass(frozen=True)
class Derivation:
    """One stored analysis: ``compute()`` returns its tables; everything it depends on is in its key.

    ``name``: a file-name stem (letters, digits, ``_`` and ``-``); ``checkpoints``: the (run, step)
    pairs whose weights it reads; ``params``: its parameters (JSON-serialisable, floats exact). The code
    it runs is found from ``compute`` itself (``sources``)."""

    name: str
    compute: Callable[[], Tables] = field(compare=False, repr=False)
    checkpoints: Sequence[tuple[Run, int]] = ()
    params: dict = field(default_factory=dict)

    def __post_init__(self):
        if not self.name or not all(c.isalnum() or c in "_-" for c in self.name):
            raise ValueError(f"a derivation's name must be letters, digits, _ and - only; got {self.name!r}")

    def sources(self) -> tuple[str, ...]:
        """The modules whose source the key hashes: ``import_closure`` of the module defining ``compute``."""
        return import_closure(getattr(self.compute, "__module__", None) or type(self.compute).__module__)

    def inputs(self) -> dict:
        """Everything the key hashes, as JSON-ready data."""
        return {"name": self.name,
                "checkpoints": [checkpoint_sha256(run, step) for run, step in self.checkpoints],
                "params": self.params,
                "sources": {module: code_sha256(module) for module in self.sources()},
                "versions": versions()}

    def key(self) -> str:
        """The SHA-256 of ``inputs()``: changes when a checkpoint, parameter, line of code or version does."""
        text = json.dumps(self.inputs(), sort_keys=True, allow_nan=False, ensure_ascii=True)
        return hashlib.sha256(text.encode()).hexdigest()

    def stem(self, key: str | None = None) -> str:
        return f"{self.name}-{(key or self.key())[:16]}"


def checkpoint_sha256(run: Run, step: int) -> dict:
    """The run, step and SHA-256 of one checkpoint, as the run's ``complete.json`` records it."""
    name = f"checkpoints/{CHECKPOINT_PATTERN.format(step)}"
    digest = run.summary.get("sha256", {}).get(name)
    if digest is None:
        raise ValueError(f"run {run.path.name} records no SHA-256 of {name} in complete.json (steps: {run.steps})")
    return {"run": run.path.name, "step": int(step), "sha256": digest}


def source_path(module: str) -> Path:
    """The source file of a module: of the loaded module if it is loaded, else found without importing it
    (inside a package, from the package's folder, so that no parent package is imported to look)."""
    loaded = sys.modules.get(module)
    if loaded is not None and str(getattr(loaded, "__file__", "")).endswith(".py"):
        return Path(loaded.__file__)  # type: ignore[arg-type]
    top, *rest = module.split(".")
    spec = importlib.util.find_spec(top)
    if spec is not None and rest and spec.submodule_search_locations:
        base = Path(next(iter(spec.submodule_search_locations))).joinpath(*rest)
        for path in (base.with_suffix(".py"), base / "__init__.py"):
            if path.exists():
                return path
    elif spec is not None and not rest and spec.origin and spec.origin.endswith(".py"):
        return Path(spec.origin)
    raise ValueError(f"no Python source found for module {module!r}")


def code_text(source: str) -> str:
    r"""``source`` without its comments and its docstrings (of the module, classes and functions), found by
    ``tokenize`` and ``ast``: what runs, so that rewording an explanation keeps the tables' keys. A line a cut
    leaves blank goes, the others stay as they are (a blank line in a string is part of its value).

    >>> code_text("'''Doc.'''\nX = 1  # one\n\ndef f():\n    '''Why ×.'''\n    return '# kept'  # ×\n")
    "X = 1\n\ndef f():\n    return '# kept'\n"
    >>> code_text("X = '''a\n\nb'''  # a blank line of its value\n")
    "X = '''a\n\nb'''\n"
    """
    original = source.split("\n")  # as ast and tokenize count lines (str.splitlines breaks at \x0c and others too)
    cuts = []  # ((line, column), (line, column)) spans in characters, lines counted from 1
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body \
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            doc = body[0]
            cuts.append(((doc.lineno, _characters(original[doc.lineno - 1], doc.col_offset)),
                         (doc.end_lineno, _characters(original[doc.end_lineno - 1], doc.end_col_offset))))  # type: ignore[operator, arg-type]
    cuts += [(token.start, token.end) for token in tokenize.generate_tokens(io.StringIO(source).readline)
             if token.type == tokenize.COMMENT]
    lines: list[str | None] = list(original)
    touched = set()
    for (first, start), (last, end) in sorted(cuts, reverse=True):  # from the end: no span overlaps a later one
        lines[first - 1] = lines[first - 1][:start] + lines[last - 1][end:]  # type: ignore[index, operator]
        lines[first:last] = [None] * (last - first)  # type: ignore[operator]  # its other lines, gone in place
        touched.add(first - 1)
    kept = [(line.rstrip(), True) if i in touched else (line, False)
            for i, line in enumerate(lines) if line is not None]
    return "\n".join(line for line, cut in kept if line or not cut)


def _characters(line: str, offset: int) -> int:
    """The character column of ``ast``'s UTF-8 byte offset ``offset`` in ``line``."""
    return len(line.encode()[:offset].decode())


_CODE: dict[tuple[str, int, int], str] = {}  # (path, mtime, size) -> the SHA-256 of its code


def code_sha256(module: str) -> str:
    """The SHA-256 of a module's code (``code_text`` of its source file, not importing it), computed once per
    version of the file in a process: every key reads the same modules."""
    path = source_path(module)
    stat = path.stat()
    place = (str(path), stat.st_mtime_ns, stat.st_size)
    if place not in _CODE:
        _CODE[place] = hashlib.sha256(code_text(path.read_text(encoding="utf-8")).encode()).hexdigest()
    return _CODE[place]


_IMPORTS: dict[tuple[str, int, int], tuple[str, ...]] = {}  # (path, mtime, size) -> its package's imports


def _package_imports(module: str) -> tuple[str, ...]:
    """The modules of ``module``'s own package that its source imports, at the top or inside a function
    (``from matcomp.runs import derived`` names the module ``matcomp.runs.derived``), and the packages
    whose ``__init__`` importing them runs."""
    path = source_path(module)
    stat = path.stat()
    cached = _IMPORTS.get((str(path), stat.st_mtime_ns, stat.st_size))
    if cached is not None:
        return cached
    top, names = module.split(".")[0], set()
    for node in ast.walk(ast.parse(path.read_bytes())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            candidates = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        else:
            continue
        for name in candidates:
            if name.split(".")[0] == top and _is_module(name):
                parts = name.split(".")
                names |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
    found = tuple(sorted(names))
    _IMPORTS[(str(path), stat.st_mtime_ns, stat.st_size)] = found
    return found


def _is_module(name: str) -> bool:
    try:
        source_path(name)
    except ValueError:
        return False
    return True


def import_closure(module: str) -> tuple[str, ...]:
    """``module`` and every module of its package that it can run: those it imports, those they import,
    and so on, with the packages' ``__init__`` modules on the way, read from the source (nothing is
    imported). What a stored table's key hashes as its code (``Derivation.sources``)."""
    parts = module.split(".")
    seen: set[str] = set()
    todo = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(_package_imports(name))
    return tuple(sorted(seen))


def versions() -> dict[str, str]:
    """The installed version of each of ``VERSIONED`` ("absent" where one is not installed)."""
    out = {}
    for name in VERSIONED:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


def working_root() -> Path:
    """The working store's ``derived/`` folder (``$MATCOMP_RUNS/derived``, else ``runs/derived``)."""
    from matcomp.runs.store import runs_root  # the store imports training; keep this module light

    return runs_root() / "derived"


# --- encoding --------------------------------------------------------------------------------------------

def encode(table: pd.DataFrame) -> tuple[bytes, dict]:
    """CSV bytes of ``table`` with its index as leading columns (17 significant digits), and how to read
    them back (``decode``): the index's level names and each numeric or boolean column's dtype (a
    float column of whole numbers is written "1", so its dtype must be recorded). Every column and
    index level must have a text name, distinct from the others."""
    index = list(table.index.names)
    names = [*index, *table.columns]
    if not all(isinstance(n, str) and n for n in names) or len(set(names)) != len(names):
        raise ValueError(f"every index level and column needs its own text name; got index {index}, "
                         f"columns {list(table.columns)}")
    flat = table.reset_index()
    dtypes = {name: str(dtype) for name, dtype in flat.dtypes.items() if dtype.kind in "biuf"}
    data = flat.to_csv(index=False, float_format=FLOAT_FORMAT, lineterminator="\n").encode()
    return data, {"index": index, "dtypes": dtypes}


def decode(data: bytes, layout: dict) -> pd.DataFrame:
    """The table ``encode`` wrote, given its ``layout``. (pandas parses floats exactly since 3.0; ``write``
    checks every table it stores reads back bit for bit.)"""
    table = pd.read_csv(io.BytesIO(data), dtype=layout["dtypes"], keep_default_na=False, na_values=[""])
    return table.set_index(layout["index"])


def _round_trip_problem(table: pd.DataFrame, back: pd.DataFrame) -> str | None:
    """Why ``back`` (``table`` encoded and decoded) is not ``table`` exactly, or None."""
    try:
        pd.testing.assert_frame_equal(table, back, check_exact=True)
    except AssertionError as err:
        return " ".join(str(err).split())
    return None


# --- the store ---------------------------------------------------------------------------------------------

def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write(derivation: Derivation, tables: Tables, root: Path, key: str | None = None) -> Tables:
    """Write ``tables`` as ``derivation``'s under ``root`` (each table first, then the manifest, all
    atomically) and return them as read back, which must be exact."""
    key = key or derivation.key()
    stem = derivation.stem(key)
    files, out = {}, {}
    for name, table in tables.items():
        if not name or not all(c.isalnum() or c in "_-" for c in name):
            raise ValueError(f"a table's name must be letters, digits, _ and - only; got {name!r}")
        data, layout = encode(table)
        back = decode(data, layout)
        problem = _round_trip_problem(table, back)
        if problem is not None:
            raise ValueError(f"table {name!r} of {derivation.name} does not read back exactly from CSV: {problem}")
        file = f"{stem}.{name}.csv"
        atomic_write_bytes(root / file, data)
        files[name] = {"file": file, **layout, "sha256": _sha256(data)}
        out[name] = back
    manifest = {"key": key, "inputs": derivation.inputs(), "tables": files}
    atomic_write_bytes(root / f"{stem}.json", json.dumps(manifest, indent=1, ensure_ascii=False).encode())
    return out


def read(derivation: Derivation, root: Path, key: str | None = None) -> tuple[Tables | None, str | None]:
    """``derivation``'s tables stored under ``root`` as (tables, None); (None, None) when none are
    stored under its key; (None, why) when they are but cannot be trusted (a missing file, bytes that
    differ from their recorded SHA-256, a manifest of another key)."""
    key = key or derivation.key()
    path = root / f"{derivation.stem(key)}.json"
    if not path.exists():
        return None, None
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        return None, f"{path.name} is unreadable ({err})"
    if manifest.get("key") != key:
        return None, f"{path.name} records another key than its inputs give"
    out = {}
    for name, entry in manifest.get("tables", {}).items():
        file = root / entry["file"]
        if not file.exists():
            return None, f"{entry['file']} is missing"
        data = file.read_bytes()
        if _sha256(data) != entry["sha256"]:
            return None, f"{entry['file']} has changed since it was written (its SHA-256 differs)"
        out[name] = decode(data, entry)
    return out, None


def load_or_compute(derivation: Derivation, shipped: bool = True, root: Path | None = None) -> Tables:
    """``derivation``'s tables: shipped (if ``shipped``), else stored in the working store ``root``
    (default ``working_root()``), else computed and stored there (see the module docstring)."""
    key = derivation.key()
    if shipped:
        tables, problem = read(derivation, SHIPPED_ROOT, key)
        if problem is not None:
            stem = SHIPPED_ROOT / derivation.stem(key)
            raise DerivedError(f"the shipped derived table {stem} is damaged: {problem}; restore it from git "
                               f"(git checkout -- {SHIPPED_ROOT}) or recompute it ({REFRESH})")
        if tables is not None:
            return tables
    root = root or working_root()
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / f".{derivation.stem(key)}.lock")):
        tables, _ = read(derivation, root, key)  # a damaged working copy is simply recomputed
        if tables is not None:
            return tables
        say(f"Computing {derivation.name} (not shipped or stored for these parameters); stored in {root} for the "
            f"next time.", page=False)
        return write(derivation, derivation.compute(), root, key)


def ship(derivation: Derivation, root: Path | None = None) -> tuple[Path, bool]:
    """Store ``derivation``'s tables in the shipped folder (``root``, default ``runs/reference/derived``),
    computing them unless the working store holds them under the same key, and remove the shipped
    files of the same name under other keys. Returns the manifest's path and whether it was new."""
    root = root or SHIPPED_ROOT
    key = derivation.key()
    tables, problem = read(derivation, root, key)
    if tables is not None:
        return root / f"{derivation.stem(key)}.json", False
    writable_store(root, "the shipped tables' folder")  # named before the tables are computed
    tables = load_or_compute(derivation, shipped=False)
    write(derivation, tables, root, key)
    for old in stale(derivation, root, key):
        old.unlink()
    return root / f"{derivation.stem(key)}.json", True


def stale(derivation: Derivation, root: Path | None = None, key: str | None = None) -> list[Path]:
    """The files under ``root`` (default: the shipped folder) of ``derivation``'s name but another key."""
    root = root or SHIPPED_ROOT
    keep = derivation.stem(key)
    return sorted(p for p in root.glob(f"{derivation.name}-*")
                  if p.name.split(".")[0].rsplit("-", 1)[0] == derivation.name and p.name.split(".")[0] != keep)


def is_shipped(derivation: Derivation, root: Path | None = None) -> bool:
    """Whether the shipped folder holds ``derivation``'s tables under its current key, whole."""
    tables, _ = read(derivation, root or SHIPPED_ROOT)
    return tables is not None
