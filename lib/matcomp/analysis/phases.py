"""The checkpoints an analysis of one run reads: those on the plateau, the pre-shift model and the
post-shift model (NeurIPS §3), chosen from the run's own drop."""

from __future__ import annotations

from dataclasses import dataclass
from textwrap import fill

from matcomp.drop import smooth
from matcomp.runs.run import Run

ON_PLATEAU = 0.9  # a checkpoint is on the plateau while smoothed L_mask >= 0.9 x the plateau level


@dataclass(frozen=True)
class Phases:
    """The checkpoints a chapter analyses, chosen from the run's drop.

    ``plateau``: checkpoints (after step 0) taken on the plateau, before the drop; ``pre``: the one
    nearest the middle of the plateau (the paper's "pre-shift" model); ``post``: the last checkpoint
    (the paper's "post-shift" model); ``note``: one sentence saying what these mean for this run.
    """

    dropped: bool
    plateau: tuple[int, ...]
    pre: int
    post: int
    note: str


def phases(run: Run) -> Phases:
    """Pre- and post-shift checkpoints of ``run``; without a drop, the whole run is plateau."""
    steps = [s for s in run.steps if s > 0] or run.steps
    drop = run.drop
    if not drop.dropped:
        return Phases(False, tuple(steps), steps[len(steps) // 2], steps[-1], note=fill(
            f"This run shows no drop: L_mask stays on its plateau ({drop.plateau:.3g}) to step {steps[-1]}, "
            f"so its 'post-shift' model (step {steps[-1]}) is still a copying model and every "
            f"before/after contrast below compares two plateau models."))
    smoothed = smooth(run.metrics)
    plateau = [s for s in steps if s < drop.half_step and smoothed.get(s, drop.plateau) >= ON_PLATEAU * drop.plateau]
    if not plateau:
        plateau = [min(steps, key=lambda s: abs(s - drop.half_step // 2))]
    pre = min(plateau, key=lambda s: abs(s - drop.half_step / 2))
    return Phases(True, tuple(plateau), pre, steps[-1], note=fill(
        f"L_mask falls below half its plateau ({drop.plateau:.3g}) at step {drop.half_step}: checkpoints "
        f"{list(plateau)} are on the plateau, step {pre} is the pre-shift model and step {steps[-1]} the "
        f"post-shift model."))
