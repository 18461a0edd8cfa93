"""Finding the plateau and the sudden drop of L_mask in a metrics table (NeurIPS §2, Fig. 2).

One definition, used by every chapter and by the presets' acceptance:

* L_mask is smoothed by a centred rolling mean over ``window`` steps;
* the **plateau** is the median of the smoothed curve over the ``plateau_steps`` steps after the
  first ``skip`` steps (the model reaches the copying plateau within ~40 steps);
* the **drop step** is the first step after ``skip`` where the smoothed curve is below half the
  plateau, and the **ten-fold step** the first where it is below a tenth of it;
* a run's **final** losses are the means over its last ``FINAL_STEPS`` steps (``final_losses``).

It is built for a mean-squared error that sits on a plateau and falls; cross-entropies and
accuracies (the GPT of App. G) have their own measures.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pandas as pd

from matcomp import checks

MSE_COLUMN = re.compile(r"(eval_)?L(_obs|_mask)?(_n\d+)?")  # the BERT's losses, the only ones detect_drop reads
FINAL_STEPS = 200  # a run's final losses are means over its last this many steps
ON_PLATEAU = 0.9  # a smoothed loss at or above this fraction of its plateau level is still on the plateau
SMOOTHING = 101  # steps of the centred mean every drop reading smooths a loss over
PLATEAU_FROM = 100  # the steps before which no plateau is read: the loss is still falling to it
PLATEAU_STEPS = 400  # steps after PLATEAU_FROM whose smoothed median is the plateau
HALF_WINDOW = SMOOTHING // 2  # steps on either side of a smoothed value that it reads
PLATEAU_SETTLED = PLATEAU_FROM + PLATEAU_STEPS + HALF_WINDOW  # the last step the plateau's estimate reads: 550


@dataclass(frozen=True)
class Drop:
    """Plateau level, drop steps (None if not reached) and the final level (``final_losses``)."""

    plateau: float
    half_step: int | None
    tenfold_step: int | None
    final: float
    column: str = "L_mask"

    @property
    def dropped(self) -> bool:
        return self.half_step is not None

    @property
    def factor(self) -> float:
        """How many times below the plateau the run ends."""
        return self.plateau / self.final

    def __str__(self) -> str:
        half = f"step {self.half_step}" if self.half_step is not None else "none"
        ten = f"step {self.tenfold_step}" if self.tenfold_step is not None else "none"
        return (f"plateau {self.column} {self.plateau:.4f}; below half: {half}; 10x below: {ten}; "
                f"final {self.final:.4g} ({self.factor:.1f}x below the plateau)")


def centred_mean(metrics: pd.DataFrame, column: str = "L_mask", window: int = SMOOTHING) -> pd.Series:
    """Centred rolling mean of ``column`` over ``window`` steps, indexed by step: the curve the drop is read on
    (a trailing mean, which the progress measures use, is ``analysis.progress.trailing_mean``)."""
    metrics = checks.table(metrics, "centred_mean: metrics", ("step", column))
    series = metrics.set_index("step")[column]
    window = checks.count(window, "centred_mean: window")
    return series.rolling(window, center=True, min_periods=window // 2 + 1).mean()


def final_losses(metrics: pd.DataFrame, steps: int = FINAL_STEPS) -> pd.Series:
    """The mean of every numeric column over the rows of the last ``steps`` steps of a table with a
    ``step`` column (rows without a value, such as unevaluated steps, are skipped).

    >>> float(final_losses(pd.DataFrame({"step": range(1, 11), "L": range(10)}), steps=4)["L"])
    7.5
    """
    metrics = checks.table(metrics, "final_losses: metrics", ("step",))
    steps = checks.count(steps, "final_losses: steps")
    last = metrics["step"].max()
    return metrics[metrics["step"] > last - steps].mean(numeric_only=True)


def detect_drop(metrics: pd.DataFrame, column: str = "L_mask", window: int = SMOOTHING, skip: int = PLATEAU_FROM,
                plateau_steps: int = PLATEAU_STEPS) -> Drop:
    """The plateau and drop of ``column`` in a metrics table with a ``step`` column. ``column`` must be
    one of the BERT's mean-squared errors (``L``, ``L_obs``, ``L_mask`` or their ``eval_`` columns):
    a cross-entropy or an accuracy neither sits at r/9 nor halves when the model learns."""
    if not isinstance(column, str) or not MSE_COLUMN.fullmatch(column):
        raise ValueError(f"detect_drop reads the mean-squared errors L, L_obs and L_mask (or their eval_ columns); "
                         f"{column!r} is not one: a cross-entropy or an accuracy needs its own measure")
    metrics = checks.table(metrics, "detect_drop: metrics", ("step", column))
    window, plateau_steps = checks.count(window, "detect_drop: window"), checks.count(plateau_steps,
                                                                                     "detect_drop: plateau_steps")
    skip = checks.integer(skip, "detect_drop: skip", low=0)
    smoothed = centred_mean(metrics, column, window)
    after = smoothed[smoothed.index > skip]
    if after.empty:
        raise ValueError(f"too short to have a plateau: the table ends at step {int(smoothed.index.max())}, and the "
                         f"plateau is read after step {skip}")
    plateau = float(after.iloc[:plateau_steps].median())

    def first_below(level: float) -> int | None:
        below = after[after < level]
        return int(below.index[0]) if len(below) else None

    return Drop(plateau=plateau, half_step=first_below(plateau / 2), tenfold_step=first_below(plateau / 10),
                final=float(final_losses(metrics)[column]), column=column)


def drop_settled(metrics: pd.DataFrame, after: int, level: float | None = None) -> bool:
    """Whether the table's L_mask drop step (``detect_drop``'s defaults) is at least ``after`` (> ``HALF_WINDOW``) steps
    before its last step, and so the same in any longer table: the smoothing window then lies whole
    inside the table at the drop and at every step of the plateau's estimate. With ``level`` (the
    copying level, ``data.second_moment``), a run whose plateau is already below half of it has no
    plateau to leave, and is settled ``after`` steps after its plateau's estimate (``PLATEAU_SETTLED``). Training
    stops on it (``train.stop_after_drop``)."""
    after = checks.integer(after, "drop_settled: after", low=HALF_WINDOW + 1)  # beyond half the smoothing window
    if level is not None:
        level = checks.number(level, "drop_settled: level", low=0, open_low=True)
    metrics = checks.table(metrics, "drop_settled: metrics", ("step", "L_mask"))
    last = int(metrics["step"].max())
    if last <= PLATEAU_SETTLED:  # the plateau's estimate reads up to here
        return False
    drop = detect_drop(metrics)
    if level is not None and drop.plateau < level / 2:
        return last >= PLATEAU_SETTLED + after
    return drop.half_step is not None and last >= drop.half_step + after


def leave_step(metrics: pd.DataFrame, level: float, near: float = ON_PLATEAU, column: str = "L_mask",
               window: int = SMOOTHING, skip: int = PLATEAU_FROM) -> int | None:
    """The first step after ``skip`` where smoothed ``column`` is below ``near`` × ``level``: the end of
    a plateau at ``level`` (``skip`` + 1 or so when the curve never sits there; None if never below)."""
    near = checks.number(near, "leave_step: near", 0, 1, open_low=True)
    level = checks.number(level, "leave_step: level", low=0, open_low=True)
    skip = checks.integer(skip, "leave_step: skip", low=0)
    smoothed = centred_mean(metrics, column, window)
    below = smoothed[(smoothed.index > skip) & (smoothed < near * level)]
    return int(below.index[0]) if len(below) else None
