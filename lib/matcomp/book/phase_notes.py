"""What a chapter prints under its run's opening: which checkpoints its pre- and post-shift models are, and why
(``analysis.phases`` chooses them; the sentences are the book's, so that the analysis layer holds no prose)."""

from __future__ import annotations

from textwrap import fill

from matcomp.analysis.phases import Phases, paper_steps, phase_targets
from matcomp.drop import ON_PLATEAU, centred_mean
from matcomp.paper import PRE_SHIFT_STEP
from matcomp.runs.run import Run

FAR = 0.25  # a pre-shift checkpoint further than this share of its target step from it: the note says why it is read


def phases_text(run: Run, read: Phases) -> str:
    """What ``read`` (``phases(run)``) means for ``run``: where it drops, by which rule its pre-shift model and
    the copy table's checkpoints were chosen, and its post-shift model; or, with no drop, that the whole run is
    plateau, and which checkpoint stands for its pre-shift model. Another run of the same config and seed with
    other saved checkpoints, or on another machine, can pick other steps, which the sentence says."""
    drop = run.drop
    if not read.dropped:
        return fill(
            f"This run shows no drop: L_mask stays on its plateau ({drop.plateau:.3g}) to step {run.last_step:,}, "
            f"so it has no post-shift model; its pre-shift model is step {read.pre:,}, the saved checkpoint nearest "
            f"the paper's pre-shift step ({PRE_SHIFT_STEP:,}), and a before/after contrast below compares two plateau "
            f"models.")
    at_paper_steps = paper_steps(run.config)
    pre_target = phase_targets(drop.half_step, at_paper_steps)[0]
    rule = "the paper's steps" if at_paper_steps else f"the paper's fractions of this run's drop step {drop.half_step}"
    return fill(
        f"L_mask falls below half its plateau ({drop.plateau:.3g}) at step {drop.half_step}. By {rule} "
        f"(NeurIPS §3; WS §3.1), step {read.pre} is the pre-shift model (the saved checkpoint nearest step "
        f"{pre_target:.0f}) and steps {list(read.copy_steps)} are the copy table's; step {read.post} is the "
        f"post-shift model. Another run of the same config and seed with other saved checkpoints, or trained on "
        f"another machine, can pick other steps.")


def phase_note(run: Run, read: Phases) -> str:
    """``phases_text``, and where the pre-shift checkpoint lies far from the step it aims at (more than ``FAR`` of
    it: the run kept no checkpoint nearer), which kept checkpoints bracket that step, that every pre-shift reading
    of the run reads it all the same (its task's row on each ladder too), and how far its smoothed L_mask is there
    from the plateau, where a pre-shift model copies."""
    text = phases_text(run, read)
    target = phase_targets(run.drop.half_step, paper_steps(run.config))[0] if read.dropped else PRE_SHIFT_STEP
    kept = [s for s in run.steps if s > 0]
    below, above = [s for s in kept if s <= target], [s for s in kept if s >= target]
    if abs(read.pre - target) <= FAR * target or not below or not above:
        return text
    level = float(centred_mean(run.metrics)[read.pre] / run.drop.plateau)
    copying = ": a copying model, as a pre-shift one is." if abs(level - 1) <= 1 - ON_PLATEAU else "."
    return text + "\n" + fill(
        f"Step {read.pre:,} lies {abs(read.pre - target):,.0f} steps from step {target:,.0f}: the run kept no "
        f"checkpoint between steps {below[-1]:,} and {above[0]:,}, so every reading of its pre-shift model (this "
        f"page's, and its task's row on each ladder) reads step {read.pre:,}, where its smoothed L_mask is "
        f"{level:.2f}× its plateau" + copying, break_on_hyphens=False)
