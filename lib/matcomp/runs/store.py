"""The run store: training runs cached on disk by their configuration.

``get_or_train(cfg)`` returns the finished run for ``cfg``: from the store if it is there and
whole, resumed if it was interrupted, continued from a shorter finished run of the same config
(``matcomp.runs.extend``), trained otherwise. A file lock makes two processes asking
for the same run train it once. A folder that cannot be trusted (a missing file, a byte changed
since it finished, by its SHA-256 in complete.json, a config that does not match) is never loaded:
it is moved aside to ``<run_id>.broken-<time>`` (nothing is deleted) and the run is trained again.

With ``$MATCOMP_NO_TRAINING=1``, a run that is not stored (or only partly) raises instead of
training: a build after ``python -m matcomp prepare`` can prove it trains nothing.

Runs live in ``$MATCOMP_RUNS`` if set, else in ``runs/`` at the top of the repository
(git-ignored), else in ``./runs``. A reference run shipped with the book (``matcomp.runs.shipped``)
whose config matches exactly is used before any of these.
"""

from __future__ import annotations

import os
import tempfile
import time
import warnings
from collections.abc import Collection
from functools import cached_property
from pathlib import Path

import pandas as pd
import torch
from filelock import FileLock

from matcomp.config import RunConfig
from matcomp.limits import GIB, exhausted, exhausted_text
from matcomp.runs.cost import check_budget, disk_bytes, memory_bytes
from matcomp.runs.engines import Engine, record
from matcomp.runs.extend import continue_from, extendable
from matcomp.runs.folder import RunFolder, sha256_file
from matcomp.runs.machine import machine
from matcomp.runs.run import Run, folder_problem, table_problem, written_problem
from matcomp.runs.shipped import REFERENCE_ROOT, REPO, find_reference
from matcomp.runs.training import resolve_device, train

ENV_RUNS = "MATCOMP_RUNS"
ENV_NO_TRAINING = "MATCOMP_NO_TRAINING"  # 1: a run that would have to train is an error; unset, '' or 0: not


class RunError(RuntimeError):
    """A run that cannot be had as asked: training is forbidden, or it trained but is not whole (its
    folder was moved aside). The command line prints it as one line."""


def training_forbidden() -> bool:
    """Whether ``$MATCOMP_NO_TRAINING`` forbids training: "1" yes, unset, "" or "0" no; any other value (a "false"
    that would forbid it) is a ValueError naming it."""
    text = os.environ.get(ENV_NO_TRAINING, "").strip()
    if text not in ("", "0", "1"):
        raise ValueError(f"${ENV_NO_TRAINING} must be 1 (training is an error) or 0 (unset: training allowed); "
                         f"got {text!r}")
    return text == "1"


def runs_root() -> Path:
    """Where runs are stored (see the module docstring); a ``$MATCOMP_RUNS`` that names a file, or a path this
    system cannot hold (too long), is a ValueError naming it, and so is a bad ``$MATCOMP_NO_TRAINING``
    (``training_forbidden``): every command and chapter finds the store before any work, while training is
    forbidden only once a run must train."""
    training_forbidden()
    if os.environ.get(ENV_RUNS):
        root = Path(os.environ[ENV_RUNS])
        try:
            is_file = root.exists() and not root.is_dir()
        except OSError as err:  # ENAMETOOLONG: a name past 255 bytes, or a path past 4,096
            raise ValueError(f"${ENV_RUNS} ({len(str(root)):,} characters) cannot be a folder here ({err.strerror}): "
                             f"name a shorter path for the run store") from None
        if is_file:
            raise ValueError(f"${ENV_RUNS} is {root}, a file: point it to a folder for the run store (made if missing)")
        return root
    if (REPO / "pyproject.toml").exists():
        return REPO / "runs"
    return Path.cwd() / "runs"


def absolute_store() -> None:
    """``$MATCOMP_RUNS``, if relative, resolved once from where the user stands, for the kernels and workers
    this process starts (a sweep's points run inside the notebook's folder)."""
    store = os.environ.get(ENV_RUNS)
    if store and not Path(store).is_absolute():
        os.environ[ENV_RUNS] = str(Path(store).resolve())


def writable_store(root: Path | str | None = None, what: str | None = None) -> Path:
    """The run store ``root`` (default ``runs_root()``), made if missing, checked writable before any work:
    a file, or a folder that cannot be written, is a ValueError naming it and where it came from (``what``,
    e.g. "the store to install into", for a folder that is not the run store)."""
    if root is not None and not isinstance(root, (str, Path)):
        raise TypeError(f"root must be a folder path; got {type(root).__name__}")
    source = what or ("root" if root is not None else (f"${ENV_RUNS}" if os.environ.get(ENV_RUNS) else "the run store"))
    hint = "" if what else f" (${ENV_RUNS})"
    if root is not None and not str(root).strip():  # Path("") is the current folder: never meant
        raise ValueError(f"{source} is empty: name a folder")
    root = Path(root) if root is not None else runs_root()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise ValueError(f"{source} is {root}, which is (or lies under) a file: name a folder") from None
    except OSError as err:
        raise ValueError(f"{source} {root} cannot be made ({err.strerror}); "
                         f"name a folder you can write{hint}") from None
    try:  # a real write: permissions alone do not tell (root writes anywhere, but not into an immutable folder)
        tempfile.TemporaryFile(dir=root).close()
    except OSError as err:
        raise ValueError(f"{source} {root} cannot be written ({err.strerror}); "
                         f"name a folder you can write{hint}") from None
    return root


def get_or_train(cfg: RunConfig, device: str | torch.device | None = None, progress: bool | str = True,
                 root: Path | str | None = None, shipped: bool = True, limit_s: float | None = None,
                 force: bool = False, engine: Engine | str = "eager", stop_at: int | None = None,
                 resumable: bool = True, location: Location | None = None,
                 writes: Collection[int] | None = None) -> Run:
    """The finished run for ``cfg``: a shipped reference run if one matches (unless ``shipped`` is
    False), else loaded from the store if there, resumed if interrupted, trained otherwise. With
    ``limit_s``, training that would outlast that many seconds stops at a checkpoint and raises
    ``Paused`` (``matcomp.runs.training``); calling again resumes it; ``stop_at`` pauses it at that
    checkpoint. ``engine``, ``resumable`` and ``writes``: how it trains (``training.train``). A run beyond this
    machine's memory, disk or a day's training (``matcomp.runs.cost.check_budget``) is refused before it
    starts, unless ``force``. ``location``: the run's ``locate`` already done, whose shipped run is used
    rather than looked up again."""
    if not isinstance(cfg, RunConfig):
        raise TypeError(f"get_or_train: cfg must be a RunConfig (matcomp.preset_config('smoke') makes one); got "
                        f"{type(cfg).__name__} {cfg!r}")
    if location is not None and location.cfg.hash != cfg.hash:
        raise ValueError(f"get_or_train: the location given is run {location.cfg.run_id}'s, not {cfg.run_id}'s")
    reference = (location.reference if location is not None else find_reference(cfg)) if shipped else None
    if reference is not None:
        return reference
    root = writable_store(root)
    folder = RunFolder(root / cfg.run_id)
    with FileLock(str(root / f".{cfg.run_id}.lock")):
        if folder.path.exists():
            problem = folder_problem(folder, cfg)
            if problem is None and folder.complete_path.exists():
                return Run(folder.path)
            if problem is not None:
                _move_aside(folder, problem)
        if training_forbidden():
            raise RunError(f"run {cfg.run_id} is not in the store {root} and ${ENV_NO_TRAINING} is set: train it "
                           f"first (python -m matcomp prepare, or unset {ENV_NO_TRAINING})")
        if not force:
            check_budget(cfg, resolve_device(device), root, folder.resume_step() or 0)
        base = None if folder.path.exists() else extendable(cfg, root)
        if base is not None:
            continue_from(base, cfg, folder)
        started = time.perf_counter()
        try:
            metrics = train(cfg, folder, device=device, progress=progress, trained=_initial_weights(cfg, root),
                            limit_s=limit_s, engine=engine, stop_at=stop_at, resumable=resumable, writes=writes)
        except (RuntimeError, MemoryError, OSError) as err:
            if exhausted(err) is None:
                raise
            raise RunError(_exhausted_text(cfg, root, device, err)) from None
        _finish(folder, cfg, device, time.perf_counter() - started, metrics,
                {**record(engine, resolve_device(device)),
                 **({"extended_from": base.path.name} if base is not None else {})})
    return Run(folder.path)


def seal_stopped(cfg: RunConfig, root: Path | str, why: str, device: str | torch.device | None = None,
                 seconds: float = 0.0, engine: Engine | str = "eager") -> Run:
    """Seal the run of ``cfg`` that training paused in ``root`` (on ``device``, ``seconds`` this session) as
    finished where it stands, its last checkpoint its last step, with ``why`` in its summary (``stopped``):
    a run that a lent machine's clock ended, which no later call could resume there."""
    folder = RunFolder(Path(root) / cfg.run_id)
    step = folder.resume_step()
    if step is None or folder.complete_path.exists():
        raise ValueError(f"run {cfg.run_id} in {root} is not paused (no resume.pt, or sealed already); nothing to stop")
    _finish(folder, cfg, device, seconds, folder.read_metrics(), {**record(engine, resolve_device(device)),
                                                                  "stopped": why})
    return Run(folder.path)


class Location:
    """Where a run stands, looked up once and read by both the announcement and the action: ``reference``, the
    shipped run of its config (None where none is); ``in_store``, the working store's state ("stored" |
    "partial" | "missing") and the steps it already holds (a resume's, or those of a shorter finished run that
    this one continues), read only when asked, so a shipped run's opening never reads the store."""

    def __init__(self, cfg: RunConfig, root: Path | str | None = None):
        self.cfg, self.root = cfg, Path(root) if root is not None else runs_root()
        self.reference = find_reference(cfg)

    @cached_property
    def in_store(self) -> tuple[str, int]:
        folder = RunFolder(self.root / self.cfg.run_id)
        if folder.complete_path.exists():
            return "stored", self.cfg.train.steps
        step = folder.resume_step()
        if step is not None:
            return "partial", step
        base = extendable(self.cfg, self.root)  # a shorter finished run that this one continues
        return ("partial", base.last_step()) if base is not None else ("missing", 0)

    def state(self, shipped: bool = True) -> tuple[str, int]:
        """("shipped" | "stored" | "partial" | "missing", steps already trained), as ``get_or_train`` will find
        it; with ``shipped`` False, as ``get_or_train(shipped=False)`` does (a run shipped with its metrics
        alone, trained for its checkpoints)."""
        if shipped and self.reference is not None:
            return "shipped", self.cfg.train.steps
        return self.in_store


def locate(cfg: RunConfig, root: Path | str | None = None) -> Location:
    """Where ``cfg``'s run stands: shipped, and in the working store ``root`` (default ``runs_root()``): the one
    prediction the plan, a chapter's training announcement and its opening read (``Location``)."""
    return Location(cfg, root)


def _initial_weights(cfg: RunConfig, root: Path) -> dict[str, torch.Tensor] | None:
    """The final weights of run ``train.init_from`` (shipped or in ``root``), for component training."""
    run_id = cfg.train.init_from
    if not run_id:
        return None
    for path in (REFERENCE_ROOT / run_id, root / run_id):
        folder = RunFolder(path)
        if folder.complete_path.exists():
            return folder.read_checkpoint(folder.last_step())
    raise ValueError(f"train.init_from names run {run_id!r}, which is neither shipped nor finished in {root}; "
                     f"train it first")


def _exhausted_text(cfg: RunConfig, root: Path, device, err: BaseException) -> str:
    """One line for training that ran out of memory or disk (``limits.exhausted``), naming the run, what sizes it
    and what it asked for; training saved its state at its last checkpoint, so the same command resumes it."""
    if exhausted(err) == "disk":
        return (f"run {cfg.run_id}: {exhausted_text(err)}; its files need about {disk_bytes(cfg) / GIB:,.1f} GiB in "
                f"{root}: free space there and the same command resumes it from its last checkpoint")
    if exhausted(err) == "path":
        return f"run {cfg.run_id}: {exhausted_text(err)}; name a shorter run store (${ENV_RUNS})"
    return (f"run {cfg.run_id} ran {exhausted_text(err)} on {resolve_device(device)}: a step needs about "
            f"{memory_bytes(cfg) / GIB:,.1f} GiB (train.batch {cfg.train.batch:,}, model.hidden {cfg.model.hidden}, "
            f"model.layers {cfg.model.layers}); shrink it or train it where it fits")


def _move_aside(folder: RunFolder, problem: str, again: bool = True) -> Path:
    target = folder.path.with_name(f"{folder.path.name}.broken-{time.strftime('%Y%m%d-%H%M%S')}")
    if again:
        warnings.warn(f"run folder {folder.path} cannot be used ({problem}); moved to {target} and training again")
    folder.path.rename(target)
    return target


def _finish(folder: RunFolder, cfg: RunConfig, device, seconds: float, metrics: pd.DataFrame,
            extra: dict) -> None:
    """Write complete.json (with the size and SHA-256 of every file, to detect any later change, and
    of resume.pt, kept so that a longer budget continues the run: ``matcomp.runs.extend``), if the
    run is whole: every checkpoint as its training wrote it (``written_problem``), its table on disk holding
    every step up to its last checkpoint, with finite losses. A run that is not is moved aside, never sealed
    (``RunError``)."""
    last = folder.checkpoint_steps()[-1]
    resume = folder.read_resume(mmap=True)
    problem = (("resume.pt is missing" if resume is None else written_problem(folder, cfg, resume, sealing=True))
               or table_problem(folder.read_metrics(), cfg, last))
    if problem is not None:
        target = _move_aside(folder, problem, again=False)
        raise RunError(f"run {cfg.run_id} is not whole ({problem}); moved to {target}")
    summary = {
        "run_id": cfg.run_id,
        "last_step": last,
        "device": str(resolve_device(device)),
        "machine": machine(),
        "wall_s_this_session": round(seconds, 1),
        "train_s": float(metrics["time_s"].dropna().iloc[-1]),
        **extra,
        **folder.fingerprint(),
        "resume_sha256": sha256_file(folder.resume_path),
    }
    folder.write_complete(summary)
