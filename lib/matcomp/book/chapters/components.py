"""The components chapter (NeurIPS Fig. 8): each group of parameters trained alone from the same start,
and how its loss leaves the copying plateau; the sentences it says of each group."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import pandas as pd

from matcomp.analysis.components import component_config
from matcomp.book.chapter import chapter_config, open_run
from matcomp.book.parameters import COUNT, STEP, STEPS, parameter
from matcomp.book.spec import ChapterSpec, RunParameters
from matcomp.book.tables import at_step
from matcomp.config import RunConfig
from matcomp.models.recipe import COMPONENT_PATTERNS
from matcomp.presets import preset_name
from matcomp.runs.run import Run
from matcomp.sizes import chapter_sizes


@dataclass(frozen=True)
class Parameters(RunParameters):
    """The parameters of the chapter's notebook (its ``parameters`` cell says what each does)."""

    steps: int | None = parameter(None, STEPS)  # budget of each component's run; None: the preset's
    # steps a run trains past its drop (or past step 550 without a plateau; 0: its whole budget); None: the preset's
    after_drop: int | None = parameter(None, STEP)
    # a curve "has a plateau" if it sits at the copying level at least this many steps
    min_plateau: int = parameter(500, COUNT)


def runs_read(preset: str) -> list[RunConfig]:
    """The chapter's run, then each group's run from its start, at the preset's budget."""
    cfg, size = chapter_config(preset), chapter_sizes(preset)
    steps = size.steps("component_steps", cfg)
    return [cfg] + [component_config(cfg, c, cfg.run_id, steps, size.after_drop) for c in COMPONENT_PATTERNS]


class Opening(NamedTuple):
    """What ``setup`` opens: the chapter's config, its trained run, each group's budget, and each group's run
    trained alone from the run's start (group -> run)."""

    cfg: RunConfig
    base: Run
    steps: int
    runs: dict[str, Run]


def setup(p: Parameters) -> Opening:
    """The chapter's config, its trained run, the budget of each group's run (``p.steps``, None: the preset's)
    and the group -> run of each group trained alone from the run's start, printed as it goes."""
    cfg = chapter_config(p.preset, p.seed, p.overrides)
    base = open_run(cfg, p.preset)
    steps = p.steps or chapter_sizes(p.preset).steps("component_steps", cfg)
    after_drop = chapter_sizes(p.preset).after_drop if p.after_drop is None else p.after_drop
    print(f"trained model: {base.config.run_id} ({preset_name(p.preset)} preset), final checkpoint step "
          f"{base.steps[-1]}; its own drop: {base.drop}")

    runs = {c: open_run(component_config(cfg, c, base.config.run_id, steps, after_drop), p.preset)
            for c in COMPONENT_PATTERNS}
    for c, run in runs.items():
        print(f"{c:>9} alone: run {run.config.run_id}, stopped at step {run.last_step:,} of {steps:,}")
    return Opening(cfg, base, steps, runs)


def component_findings(table: pd.DataFrame, min_plateau: int) -> list[str]:
    """One sentence per group of a ``matcomp.analysis.components.plateau_table``: whether it has a plateau
    (and how long, against the ``min_plateau`` threshold; "only just" when under twice it), where it
    falls below half, in how many steps and whether suddenly, and its final L_mask.

    >>> t = pd.DataFrame({"plateau": ["yes"], "leaves the plateau": [561], "below half": [2703],
    ...                   "fall (steps)": [2142], "fall": ["gradual"], "final L_mask": [0.02]}, index=["attention"])
    >>> for part in component_findings(t, 500)[0].split("; "): print(part)
    attention: a plateau of 561 steps, only just above the 500-step threshold
    it then falls to half the plateau in 2,142 steps (gradual: longer than the plateau), at step 2,703
    L_mask 0.020 at its last step.
    >>> short = t.assign(plateau="no", **{"leaves the plateau": None, "below half": None})
    >>> for part in component_findings(short, 500)[0].split(", "): print(part)
    attention: on the copying level for the whole of its run
    which is shorter than the 500-step threshold
    so not counted as a plateau; it does not fall below half within its run; L_mask 0.020 at its last step.
    """
    sentences = []
    for name, row in table.iterrows():
        leaves = row["leaves the plateau"]
        if row["plateau"] == "yes":
            close = ", only just above" if pd.notna(leaves) and leaves < 2 * min_plateau else ", against"
            text = (f"{name}: a plateau of {int(leaves):,} steps{close} the {min_plateau:,}-step threshold"
                    if pd.notna(leaves) else f"{name}: a plateau to the end of its run")
        elif pd.isna(leaves):
            text = (f"{name}: on the copying level for the whole of its run, which is shorter than the "
                    f"{min_plateau:,}-step threshold, so not counted as a plateau")
        else:
            text = f"{name}: no plateau (it leaves the copying level {at_step(leaves)})"
        if pd.notna(row["below half"]):
            kind = "longer than" if row["fall"] == "gradual" else "shorter than"
            fall = (f"; it then falls to half the plateau in {int(row['fall (steps)']):,} steps ({row['fall']}: {kind} "
                    f"the plateau), {at_step(row['below half'])}" if row["plateau"] == "yes" and pd.notna(leaves)
                    else f"; below half {at_step(row['below half'])}")
            text += fall
        else:
            text += "; it does not fall below half within its run"
        sentences.append(text + f"; L_mask {row['final L_mask']:.3f} at its last step.")
    return sentences


CHAPTER = ChapterSpec("components", Parameters, runs_read, opening=Opening)
