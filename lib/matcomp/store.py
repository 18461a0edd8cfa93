"""The run store: training runs cached on disk by their configuration.

``get_or_train(cfg)`` returns the finished run for ``cfg``: from the store if it is there and
whole, resumed if it was interrupted, trained otherwise. A file lock makes two processes asking
for the same run train it once. A folder that cannot be trusted (a missing or truncated file, a
config that does not match) is never loaded: it is moved aside to ``<run_id>.broken-<time>``
(nothing is deleted) and the run is trained again.

Runs live in ``$MATCOMP_RUNS`` if set, else in ``runs/`` at the top of the repository
(git-ignored), else in ``./runs``.
"""

from __future__ import annotations

import os
import time
import warnings
from functools import cached_property
from pathlib import Path

import pandas as pd
import torch
from filelock import FileLock

from matcomp.config import RunConfig
from matcomp.drop import Drop, detect_drop
from matcomp.files import RunFolder
from matcomp.model import MatrixBert, build_model
from matcomp.training import resolve_device, train

ENV_RUNS = "MATCOMP_RUNS"


def runs_root() -> Path:
    """Where runs are stored (see the module docstring)."""
    if os.environ.get(ENV_RUNS):
        return Path(os.environ[ENV_RUNS])
    repo = Path(__file__).resolve().parents[2]
    if (repo / "pyproject.toml").exists():
        return repo / "runs"
    return Path.cwd() / "runs"


class Run:
    """A finished training run: its config, metrics table and checkpoints."""

    def __init__(self, path: Path | str):
        self.folder = RunFolder(path)
        self.path = self.folder.path
        self.config = self.folder.read_config()
        self.summary = self.folder.read_complete()

    def __repr__(self) -> str:
        return f"Run({self.config.run_id}, steps={self.config.train.steps}, path={self.path})"

    @cached_property
    def metrics(self) -> pd.DataFrame:
        """One row per step: ``step, L, L_obs, L_mask, mask_value, eval_*, time_s``."""
        return self.folder.read_metrics()

    @property
    def steps(self) -> list[int]:
        """Steps with a saved checkpoint."""
        return self.folder.checkpoint_steps()

    def checkpoint(self, step: int, device: str | torch.device = "cpu", attention: str | None = None) -> MatrixBert:
        """The model after ``step`` updates, in eval mode (``step`` must be in ``self.steps``)."""
        cfg = self.config
        model = build_model(cfg.model, seed=cfg.train.seed, attention=attention or cfg.train.attention)
        model.load_state_dict(self.folder.read_checkpoint(step))
        return model.to(device).eval()

    def nearest_step(self, step: int) -> int:
        """The checkpointed step closest to ``step``."""
        return min(self.steps, key=lambda s: abs(s - step))

    @cached_property
    def drop(self) -> Drop:
        """Plateau and drop of L_mask (see ``matcomp.drop``)."""
        return detect_drop(self.metrics)


def verify(folder: RunFolder, cfg: RunConfig | None = None) -> str | None:
    """Why a finished run folder cannot be trusted, or None if it can."""
    summary = folder.read_complete()
    if summary is None:
        return "complete.json is missing"
    try:
        stored = folder.read_config()
    except (OSError, ValueError) as err:
        return f"config.json is unreadable ({err})"
    if cfg is not None and stored != cfg:
        return "config.json differs from the requested config"
    for name, size in summary["files"].items():
        path = folder.path / name
        if not path.exists() or path.stat().st_size != size:
            return f"{name} is missing or has the wrong size"
    return None


def open_run(path: Path | str) -> Run:
    """A finished run from its folder; raises ``ValueError`` if the folder is not whole."""
    problem = verify(RunFolder(path))
    if problem:
        raise ValueError(f"{path} is not a finished run: {problem}")
    return Run(path)


def get_or_train(cfg: RunConfig, device: str | torch.device | None = None, progress: bool = True,
                 root: Path | str | None = None) -> Run:
    """The finished run for ``cfg``: loaded if stored, resumed if interrupted, trained otherwise."""
    root = Path(root) if root is not None else runs_root()
    root.mkdir(parents=True, exist_ok=True)
    folder = RunFolder(root / cfg.run_id)
    with FileLock(str(root / f".{cfg.run_id}.lock")):
        if folder.path.exists():
            problem = _check_existing(folder, cfg)
            if problem is None and folder.complete_path.exists():
                return Run(folder.path)
            if problem is not None:
                _move_aside(folder, problem)
        started = time.perf_counter()
        train(cfg, folder, device=device, progress=progress)
        _finish(folder, cfg, device, time.perf_counter() - started)
    return Run(folder.path)


def _check_existing(folder: RunFolder, cfg: RunConfig) -> str | None:
    """Why an existing folder cannot be used as it is (finished or resumable), or None."""
    if folder.complete_path.exists():
        return verify(folder, cfg)
    try:
        if folder.read_config() != cfg:
            return "config.json differs from the requested config"
        resume = folder.read_resume()
        if resume is not None:
            folder.read_metrics()
    except Exception as err:  # any unreadable file means: do not trust this folder
        return f"unreadable files ({type(err).__name__}: {err})"
    return None


def _move_aside(folder: RunFolder, problem: str) -> None:
    target = folder.path.with_name(f"{folder.path.name}.broken-{time.strftime('%Y%m%d-%H%M%S')}")
    warnings.warn(f"run folder {folder.path} cannot be used ({problem}); moved to {target} and training again")
    folder.path.rename(target)


def _finish(folder: RunFolder, cfg: RunConfig, device, seconds: float) -> None:
    """Write complete.json (with the size of every file, to detect damage later) and drop resume.pt."""
    files = [folder.config_path, folder.metrics_path, *folder.checkpoint_dir.glob("*.safetensors")]
    metrics = folder.read_metrics()
    summary = {
        "run_id": cfg.run_id,
        "device": str(resolve_device(device)),
        "torch": torch.__version__,
        "wall_s_this_session": round(seconds, 1),
        "train_s": float(metrics["time_s"].dropna().iloc[-1]),
        "files": {str(p.relative_to(folder.path)): p.stat().st_size for p in sorted(files)},
    }
    folder.write_complete(summary)
    folder.resume_path.unlink(missing_ok=True)
