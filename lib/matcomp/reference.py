"""Reference runs shipped with the book in ``runs/reference/`` (committed to the repository), so
chapters and CI analyse a real post-drop model without training it.

``get_or_train`` uses a shipped run only when its config equals the requested one (all but the
name); any other config trains into the working store. ``export_reference`` copies a finished run
with a chosen subset of its checkpoints into the shipped store, recording the exact command that
regenerates it.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

from matcomp.config import RunConfig
from matcomp.files import RunFolder
from matcomp.run import Run, verify

REFERENCE_ROOT = Path(__file__).resolve().parents[2] / "runs" / "reference"


def find_reference(cfg: RunConfig, root: Path = REFERENCE_ROOT) -> Run | None:
    """The shipped reference run whose config equals ``cfg`` (name aside), if there is a whole one."""
    for path in sorted(root.glob(f"*-{cfg.hash}")):
        problem = verify(RunFolder(path), cfg)
        if problem is None:
            return Run(path)
        warnings.warn(f"shipped run {path} cannot be used ({problem}); using the working store")
    return None



def export_reference(run: Run, steps: list[int], command: str, root: Path = REFERENCE_ROOT) -> Run:
    """Copy ``run`` with the checkpoints at ``steps`` into the shipped reference store.

    ``command`` is the exact command that regenerates the run; it is kept in ``complete.json``.
    """
    missing = sorted(set(steps) - set(run.steps))
    if missing:
        raise ValueError(f"steps {missing} have no checkpoint in {run.path}")
    target = RunFolder(root / run.config.run_id)
    if target.path.exists():
        raise ValueError(f"{target.path} exists already; remove it first to replace it")
    staging = RunFolder(root / f".{run.config.run_id}.staging")
    shutil.rmtree(staging.path, ignore_errors=True)
    staging.checkpoint_dir.mkdir(parents=True)
    for path in (run.folder.config_path, run.folder.metrics_path):
        shutil.copy2(path, staging.path / path.name)
    for step in sorted(steps):
        shutil.copy2(run.folder.checkpoint_path(step), staging.checkpoint_path(step))
    files = [staging.config_path, staging.metrics_path, *staging.checkpoint_dir.glob("*.safetensors")]
    staging.write_complete({**run.summary, "command": command, "files": staging.sizes(files)})
    staging.path.rename(target.path)  # appears whole or not at all
    return Run(target.path)
