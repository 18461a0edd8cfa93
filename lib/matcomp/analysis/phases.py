"""The checkpoints an analysis of one run reads: those on the plateau, the pre-shift model and the
post-shift model (NeurIPS §3), chosen from the run's own drop and its own recipe, so the same whoever opens it."""

from __future__ import annotations

from dataclasses import dataclass

from matcomp.config import RunConfig
from matcomp.drop import ON_PLATEAU, Drop, centred_mean, leave_step
from matcomp.paper import COPY_TABLE_STEPS, PRE_SHIFT_STEP, SUDDEN_DROP
from matcomp.presets import preset_config
from matcomp.runs.run import Run
from matcomp.sizes import CHAPTER_SIZES


@dataclass(frozen=True)
class Phases:
    """The checkpoints a chapter analyses, chosen from the run's drop (``phases``).

    ``plateau``: checkpoints (after step 0) on the plateau, before the drop; ``pre``: the paper's
    pre-shift model; ``copy_steps``: the three plateau checkpoints of the copy table (Table 1);
    ``post``: the last checkpoint (the paper's post-shift model). What they mean for a run is said by the book
    (``book.phase_notes``).
    """

    dropped: bool
    plateau: tuple[int, ...]
    pre: int
    copy_steps: tuple[int, ...]
    post: int


def phase_targets(drop_step: int | None, paper_steps: bool) -> tuple[float, tuple[float, ...]]:
    """The steps the pre-shift model and the copy table aim at: the paper's own (4,000; 1,000,
    4,000 and 14,000, NeurIPS §3, WS §3.1 and Table 1) with ``paper_steps`` (the paper's presets), else the
    same fractions of this run's drop step (the paper's drop is near 15,000: 0.27, and 0.07 / 0.27
    / 0.93). None without a drop.

    >>> phase_targets(6000, paper_steps=False)
    (1600.0, (400.0, 1600.0, 5600.0))
    """
    if paper_steps:
        return float(PRE_SHIFT_STEP), tuple(float(s) for s in COPY_TABLE_STEPS)
    if drop_step is None:
        raise ValueError("a run without a drop has no pre-shift model")
    scale = drop_step / SUDDEN_DROP["drop step"]
    return PRE_SHIFT_STEP * scale, tuple(s * scale for s in COPY_TABLE_STEPS)


def paper_steps(cfg: RunConfig) -> bool:
    """Whether the pre-shift model of a run of ``cfg`` is at the paper's own steps, not at fractions of its drop:
    a run that trains the model of a preset whose sizes say so (the paper's, ``ChapterSizes.paper_steps``) on its
    task at its learning rate and batch, whatever else it changes (steps, precision, seed). Read from fields the
    run's hash covers, never from its ``name``, so that two runs of one hash read the same phases."""
    return any(cfg.data == paper.data and cfg.model == paper.model
               and (cfg.train.lr, cfg.train.batch) == (paper.train.lr, paper.train.batch)
               for paper in (preset_config(name) for name, sizes in CHAPTER_SIZES.items() if sizes.paper_steps))


def phases(run: Run) -> Phases:
    """Pre- and post-shift checkpoints of ``run`` (``phase_targets`` at ``paper_steps``, each the nearest
    checkpoint after step 0); without a drop the whole run is plateau, and its pre-shift model the checkpoint nearest
    the paper's (step 4,000): a copying model as far into training as the paper's, whichever seed it is."""
    steps = [s for s in run.steps if s > 0] or run.steps
    drop = run.drop
    if drop.half_step is None:
        pre = run.nearest_step(PRE_SHIFT_STEP, trained=True)
        return Phases(False, tuple(steps), pre, tuple(dict.fromkeys((steps[0], pre, steps[-1]))), steps[-1])
    smoothed = centred_mean(run.metrics)
    plateau = [s for s in steps if s < drop.half_step and smoothed.get(s, drop.plateau) >= ON_PLATEAU * drop.plateau]
    at_paper_steps = paper_steps(run.config)
    pre_target, copy_targets = phase_targets(drop.half_step, at_paper_steps)
    pre = run.nearest_step(pre_target, trained=True)
    copy_steps = tuple(dict.fromkeys(run.nearest_step(t, trained=True) for t in copy_targets))
    return Phases(True, tuple(plateau or [pre]), pre, copy_steps, steps[-1])


def phase_checkpoints(run: Run) -> list[int]:
    """The checkpoints the chapters read as pre-shift and copy-table models, kept when a run is shipped; none
    for a GPT or a run without a drop."""
    if run.config.model.arch != "bert" or run.drop.half_step is None:
        return []
    read = phases(run)
    return sorted({read.pre, *read.copy_steps})


def answer_rise(metrics, drop: Drop) -> dict[str, float] | None:
    """How the model's mean |answer| at missing entries (``mask_value``, smoothed as the losses are) moves
    before the drop: its lowest value on the plateau and where, its value where L_mask leaves the plateau
    (``leave_step``: below ``ON_PLATEAU`` of it) and at the drop. None without a drop."""
    if drop.half_step is None:
        return None
    answer = centred_mean(metrics, "mask_value")
    leave = leave_step(metrics, drop.plateau) or drop.half_step
    before = answer[(answer.index > 100) & (answer.index <= leave)]
    low = int(before.idxmin()) if len(before) else leave
    return {"lowest step": low, "lowest": float(answer[low]), "leave step": leave, "at leave": float(answer[leave]),
            "drop step": drop.half_step, "at drop": float(answer[drop.half_step])}
