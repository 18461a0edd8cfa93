"""Reference runs shipped with the book in ``runs/reference/`` (committed to the repository), so
chapters and CI analyse a real post-drop model without training it.

``get_or_train`` uses a shipped run only when its config equals the requested one (all but the
name); any other config trains into the working store. ``export_reference`` copies a finished run
with a chosen subset of its checkpoints into the shipped store, recording the exact command that
regenerates it.
"""

from __future__ import annotations

import math
import re
import shutil
from pathlib import Path

import pandas as pd
import torch

from matcomp.config import RunConfig
from matcomp.metrics import LOSSES
from matcomp.runs.folder import RunFolder
from matcomp.runs.machine import machine
from matcomp.runs.run import Run, folder_problem, verify

REPO = Path(__file__).resolve().parents[3]  # the repository: lib/matcomp/runs/shipped.py -> .
REFERENCE_ROOT = REPO / "runs" / "reference"


def find_reference(cfg: RunConfig, root: Path | None = None) -> Run | None:
    """The shipped reference run whose config equals ``cfg`` (name aside), if one is shipped.

    Every byte of it is checked against its complete.json; a shipped run that fails the check is
    an error (naming the command that regenerates it), never silently replaced by training."""
    for path in sorted((root or REFERENCE_ROOT).glob(f"*-{cfg.hash}")):
        folder = RunFolder(path)
        problem = verify(folder, cfg)
        if problem is not None:
            try:
                command = (folder.read_complete() or {}).get("command", "")
            except ValueError:  # the seal itself is what is damaged
                command = ""
            command = command or "python -m matcomp train ... && ... ship ..."
            raise ValueError(f"the shipped run {path} is damaged ({problem}); restore it from git "
                             f"(git checkout -- {path}) or regenerate it: rm -r {path} && {command}")
        return Run(path)
    return None


def required_reference(cfg: RunConfig) -> Run:
    """The shipped run of ``cfg``; a ValueError if none is: what a shipped derived table reads."""
    run = find_reference(cfg)
    if run is None:
        raise ValueError(f"run {cfg.run_id} is not shipped; a shipped derived table must read shipped runs")
    return run


def reference_steps(run: Run, max_bytes: int, keep=()) -> list[int]:
    """Checkpoints to ship within ``max_bytes`` (with the config and metrics): the first and last, the
    steps ``keep`` (e.g. the checkpoints the chapters analyse as pre-shift), those around the drop (up
    to half the budget), and evenly spaced others."""
    steps = run.steps
    fixed = run.folder.config_path.stat().st_size + run.folder.metrics_path.stat().st_size
    capacity = max(0, (max_bytes - fixed) // run.folder.checkpoint_path(steps[-1]).stat().st_size)
    if capacity < 2:
        raise ValueError(f"max_bytes = {max_bytes} leaves room for {capacity} checkpoints; at least 2 are needed")
    if len(steps) <= capacity:
        return steps
    unknown = sorted(set(keep) - set(steps))
    if unknown:
        raise ValueError(f"keep names steps without a checkpoint: {unknown}")
    chosen = {steps[0], steps[-1], *keep}
    if len(chosen) > capacity:
        raise ValueError(f"max_bytes = {max_bytes} leaves room for {capacity} checkpoints; the first, the last "
                         f"and keep need {len(chosen)}")
    try:
        drop = run.drop
    except ValueError:  # a run too short to have a plateau has no drop to keep
        drop = None
    half = drop.half_step if drop is not None else None
    if drop is not None and half is not None:
        margin = half // 4
        lo, hi = half - margin, (drop.tenfold_step or half) + margin
        share = min(capacity // 2, capacity - len(chosen))
        chosen |= set(_evenly([s for s in steps if lo <= s <= hi], share))
    rest = [s for s in steps if s not in chosen]
    return sorted(chosen | set(_evenly(rest, capacity - len(chosen))))


def _evenly(items: list[int], k: int) -> list[int]:
    """At most ``k`` of ``items``, evenly spaced: the middle one for k = 1, else first and last included."""
    if k >= len(items):
        return items
    if k <= 0:
        return []
    if k == 1:
        return [items[len(items) // 2]]
    return sorted({items[round(i * (len(items) - 1) / (k - 1))] for i in range(k)})


def export_reference(run: Run, steps: list[int], command: str, root: Path | None = None,
                     dtype: torch.dtype | None = None) -> Run:
    """Copy ``run`` with the checkpoints at ``steps`` into the shipped reference store (or ``root``).

    ``command`` is the exact command that regenerates the run; it is kept in ``complete.json``. With
    ``dtype`` (``torch.bfloat16``: half the bytes of a large model), the checkpoints' floating-point
    tensors are stored rounded to it, and ``complete.json`` says so (``checkpoint_dtype``); they load into
    the fp32 model as they are.
    """
    missing = sorted(set(steps) - set(run.steps))
    if missing:
        raise ValueError(f"steps {missing} have no checkpoint in {run.path}")
    root = root or REFERENCE_ROOT
    target = RunFolder(root / run.config.run_id)
    if target.path.exists():
        raise ValueError(f"{target.path} exists already; remove it first to replace it")
    staging = RunFolder(root / f".{run.config.run_id}.staging")
    shutil.rmtree(staging.path, ignore_errors=True)
    staging.checkpoint_dir.mkdir(parents=True)
    for path in (run.folder.config_path, run.folder.metrics_path):
        shutil.copy2(path, staging.path / path.name)
    for step in sorted(steps):
        if dtype is None:
            shutil.copy2(run.folder.checkpoint_path(step), staging.checkpoint_path(step))
        else:
            weights = run.folder.read_checkpoint(step)
            staging.write_checkpoint(step, {k: v.to(dtype) if v.is_floating_point() else v for k, v in weights.items()},
                                     run.config)
    rounded = {} if dtype is None else {"checkpoint_dtype": str(dtype).removeprefix("torch.")}
    staging.write_complete({**run.summary, "last_step": run.last_step, "command": command, **rounded,
                            **staging.fingerprint()})
    staging.path.rename(target.path)  # appears whole or not at all
    return Run(target.path)


def narrow_reference(run: Run, steps: list[int]) -> Run:
    """Keep only the checkpoints at ``steps`` of the shipped ``run`` (none: its metrics alone), re-sealed,
    its command's ``ship`` part naming them: shipped weight is only what the chapters read. The old
    folder is set aside until the new one is whole, so a crash loses nothing."""
    extra = sorted(set(steps) - set(run.steps))
    if extra:
        raise ValueError(f"steps {extra} are not shipped with {run.path.name}; narrowing cannot add checkpoints")
    trained = run.summary["command"].split(" && ")[0]
    ship = re.sub(r" --threads \S+| --no-shipped", "", trained).replace(" train ", " ship ", 1)
    command = f"{trained} && {ship} --steps" + "".join(f" {step}" for step in sorted(steps))
    aside = run.path.parent / f".{run.path.name}.narrowing" / run.path.name  # still a folder named by its run id
    aside.parent.mkdir(exist_ok=True)
    run.path.rename(aside)
    try:
        narrowed = export_reference(Run(aside), steps, command, root=run.path.parent)
    except BaseException:
        aside.rename(run.path)
        aside.parent.rmdir()
        raise
    shutil.rmtree(aside.parent)
    return narrowed


RETRACE = 0.01  # the largest gap in a loss, over the total loss, by which a retraining still retraces a run


def retrace_gap(shipped: pd.DataFrame, retrained: pd.DataFrame, to_step: int) -> float:
    """The largest gap between two trainings' losses (``LOSSES``, train and evaluation) at every step to
    ``to_step``, over the total loss L at that step (the evaluation's L for its losses: L_obs is a thousandth of
    L on the plateau, and a relative gap in it measures rounding, not the trajectory): 0 where the retraining
    repeats the run bit for bit (the same kind of machine), small where another machine's rounding moves it,
    infinite where a loss is logged in one and not in the other (NaN); a step the retraining lacks is a
    ValueError.

    >>> a = pd.DataFrame({"step": [1, 2], "L": [1.0, 0.5], "L_obs": [0.001, 0.001], "L_mask": [1.0, 1.0]})
    >>> [round(retrace_gap(a, b, 2), 6) for b in (a.assign(L=[1.0, 0.51]), a.assign(L_obs=[0.001, 0.0012]))]
    [0.02, 0.0004]
    """
    ours, theirs = (t.set_index("step").loc[lambda d: d.index <= to_step] for t in (shipped, retrained))
    if not ours.index.equals(theirs.index):
        raise ValueError(f"the retraining does not log every step to {to_step} that the shipped run does")
    gaps = []
    for prefix in ("", "eval_"):
        names = [prefix + name for name in LOSSES if prefix + name in ours and prefix + name in theirs]
        scale = ours[prefix + "L"].abs() if prefix + "L" in ours else None
        if names and scale is not None:
            a, b = ours[names], theirs[names]
            if (a.isna() != b.isna()).to_numpy().any():  # a loss logged in one and missing or NaN in the other
                return math.inf
            gaps.append(float((b - a).abs().div(scale, axis=0).max().max()))  # steps without an evaluation skipped
    return max(gaps, default=0.0)


def add_checkpoints(run: Run, source: RunFolder, steps: list[int], command: str,
                    retrain: str = "python -m matcomp train ... --no-shipped") -> Run:
    """Add to the shipped ``run`` the checkpoints at ``steps`` of ``source``, the same config trained again from
    step 0 in the working store (a seed kept with its metrics alone gains the pre-shift model its findings read).
    The retraining must retrace the shipped metrics to the last step added (``retrace_gap``): bit for bit on
    the kind of machine that trained them, within ``RETRACE`` of the loss on another (a GPU's run retrained on
    a CPU), and ``complete.json`` keeps the gap, the steps and the machine that retrained them (``retraced``:
    this one). The retraining's checkpoints are checked first (``folder_problem``: as its training wrote them). The
    new folder is sealed beside the old one before it takes its place, so a crash loses nothing; a step the run
    ships already is refused, never overwritten. ``retrain``: the command that trains ``source``, which a
    refusal names, ``--stop-at`` added."""
    to = f"{retrain} --stop-at {max(steps)}"
    if not source.config_path.exists():
        raise ValueError(f"no retraining of {run.path.name} in {source.path.parent}: train it to step {max(steps)} "
                         f"first ({to})")
    if source.read_config() != run.config:
        raise ValueError(f"{source.path} holds another config than the shipped {run.path.name}")
    problem = folder_problem(source, run.config)
    if problem is not None:
        raise ValueError(f"the retraining in {source.path} cannot be trusted ({problem}); remove it and train it "
                         f"again ({to})")
    kept = sorted(set(steps) & set(run.steps))
    if kept:
        raise ValueError(f"steps {kept} are shipped with {run.path.name} already; add only the checkpoints it lacks")
    have = source.checkpoint_steps()
    missing = sorted(set(steps) - set(have))
    if missing:
        raise ValueError(f"steps {missing} have no checkpoint in {source.path} (it has {have}); train it to them "
                         f"with {retrain} --stop-at {max(missing)}")
    gap = retrace_gap(run.metrics, source.read_metrics(), max(steps))
    if not gap <= RETRACE:  # NaN too: a retraining whose losses went NaN retraces nothing
        raise ValueError(f"the retraining in {source.path} departs from the shipped {run.path.name} by {gap:.1%} of "
                         f"its loss before step {max(steps):,} (at most {RETRACE:.0%}): not the same run")
    staging, aside = (run.path.with_name(f".{run.path.name}.{what}") for what in ("adding", "replaced"))
    shutil.rmtree(staging, ignore_errors=True)
    try:
        shutil.copytree(run.path, staging)
        target = RunFolder(staging)
        target.checkpoint_dir.mkdir(exist_ok=True)
        for step in steps:
            shutil.copy2(source.checkpoint_path(step), target.checkpoint_path(step))
        where = {key: value for key, value in machine().items() if key != "threads"}  # the command names its threads
        before = run.summary.get("retraced", {})
        retraced = {"steps": sorted({*before.get("steps", []), *steps}), "gap": max(gap, before.get("gap", 0.0)),
                    "machine": where}
        summary = {key: value for key, value in run.summary.items() if key not in ("files", "sha256")}
        target.write_complete({**summary, "command": command, "retraced": retraced, **target.fingerprint()})
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)  # the shipped run was not touched
        raise
    run.path.rename(aside)  # the sealed copy replaces it: between these two renames the run is in ``aside``
    staging.rename(run.path)
    shutil.rmtree(aside)
    return Run(run.path)
