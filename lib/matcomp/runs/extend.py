"""Continuing a finished run to a longer budget, exactly.

A finished run keeps its last training state (``resume.pt``: weights, Adam moments, both
generators; its SHA-256 is in ``complete.json``), so a config that differs from it only by a budget
that ends later (a larger ``train.steps``, or, for a run that stopped after its drop, a larger
``train.stop_after_drop``) starts from a copy of its folder and trains the missing steps, instead
of training again from step 0. The result is the run the longer config would have trained from
scratch, step for step; the copy keeps the shorter run's last checkpoint too, even where the longer
schedule has none.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from matcomp.config import RunConfig
from matcomp.runs.folder import RunFolder, sha256_file
from matcomp.runs.run import verify


def continues(base: RunConfig, cfg: RunConfig, last_step: int) -> bool:
    """Whether ``cfg`` is ``base``, which ended at ``last_step``, trained for longer: equal but for a
    budget that goes past ``last_step`` and a ``train.stop_after_drop`` that cannot have stopped at or
    before it (0; else at least base's, and larger where base stopped after its drop)."""
    old, new = base.train, cfg.train
    stopped_after_drop = last_step < old.steps
    if new.stop_after_drop == 0:
        later = True
    elif stopped_after_drop:
        later = new.stop_after_drop > old.stop_after_drop
    else:
        later = old.stop_after_drop != 0 and new.stop_after_drop >= old.stop_after_drop
    return new.steps > last_step and later and _identity(base) == _identity(cfg)


def _identity(cfg: RunConfig) -> dict:
    """Everything that makes a run but its name, its budget and where it stops after its drop."""
    d = cfg.to_dict()
    del d["name"], d["train"]["steps"], d["train"]["stop_after_drop"]
    return d


def extendable(cfg: RunConfig, root: Path) -> RunFolder | None:
    """The finished run in ``root`` that ``cfg`` continues, with its training state whole (the
    longest such run), or None."""
    found: list[tuple[int, RunFolder]] = []
    for path in root.glob("*-*"):
        folder = RunFolder(path)
        if ".broken-" in path.name or not (folder.complete_path.exists() and folder.resume_path.exists()):
            continue
        try:
            base, last = folder.read_config(), folder.last_step()
        except (OSError, ValueError):  # a damaged folder continues nothing (training the run itself moves it aside)
            continue
        if continues(base, cfg, last) and state_problem(folder) is None and verify(folder, base) is None:
            found.append((last, folder))
    return max(found, key=lambda item: item[0])[1] if found else None


def state_problem(folder: RunFolder) -> str | None:
    """Why a finished run's kept training state cannot be trusted, or None."""
    recorded = (folder.read_complete() or {}).get("resume_sha256")
    if recorded is None:
        return "complete.json records no SHA-256 of resume.pt"
    if sha256_file(folder.resume_path) != recorded:
        return "resume.pt has changed since the run finished"
    return None


def continue_from(base: RunFolder, cfg: RunConfig, folder: RunFolder) -> None:
    """Make ``folder`` the unfinished run of ``cfg`` at ``base``'s last step: its checkpoints (linked,
    never written in place), metrics and training state, under ``cfg``'s config, the state recording ``cfg``'s
    run and the SHA-256 of every checkpoint (those ``base`` was sealed with) and of the metrics, as training
    records those it writes. Built aside and moved into place, so a crash leaves no half-copied run."""
    staging = RunFolder(folder.path.with_name(f".{folder.path.name}.extending"))
    shutil.rmtree(staging.path, ignore_errors=True)
    staging.checkpoint_dir.mkdir(parents=True)
    for step in base.checkpoint_steps():
        _link_or_copy(base.checkpoint_path(step), staging.checkpoint_path(step))
    shutil.copy2(base.metrics_path, staging.path / base.metrics_path.name)
    sealed = (base.read_complete() or {})["sha256"]
    written = {step: sealed[base.checkpoint_path(step).relative_to(base.path).as_posix()]
               for step in base.checkpoint_steps()}
    staging.write_resume({**(base.read_resume() or {}), "run": cfg.hash, "checkpoint_sha256": written,
                          "metrics_sha256": sha256_file(staging.metrics_path)})
    staging.write_config(cfg)
    staging.path.rename(folder.path)


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:  # another file system, or one without hard links
        shutil.copy2(source, target)
