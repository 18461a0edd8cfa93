"""A prospective alarm for the drop (the progress chapter): does attention announce it, out of sample?

The progress measures (``matcomp.analysis.progress``) show, looking back, row or column attention
leaving its plateau level before the loss. Looking back uses the drop step to set the reference
window. A prospective rule may not: at each checkpoint t the alarm reads only checkpoints ≤ t.

* **Signals**, each a trailing mean over the checkpoints of the last ``SPAN`` steps:
  ``attention``: how far the best row or column head sits above uniform attention,
  max(row / uniform row, column / uniform column) − 1 (uniform: (n − 1)/S and (m − 1)/S, a known
  level, so nothing is estimated from the run itself); ``loss``, the baseline: how far L_mask on the
  measures' fixed batch sits below the copying level r/9, 1 − L_mask / level.
* **Alarm**: the first checkpoint from step ``ARM`` on (the model copies by step ~40) where the signal
  exceeds its threshold.
* **Scoring**: an alarm is a hit when the drop (half the plateau, ``matcomp.drop``) follows within
  ``WINDOW`` steps, a false alarm when it comes earlier or on a run that never drops, a miss when it
  comes after the drop or not at all.
* **Fitting** (``fit_threshold``): the smallest threshold that gives no false alarm on the fitting
  runs, raised by ``MARGIN``; the same procedure for both signals, so they are compared at the same
  false-alarm rate on the runs they were fitted on.

``FROZEN`` holds both thresholds as fitted on seeds 0–4 of the ``cpu`` progress runs, written here
before any held-out seed was trained (a test re-fits them); every later run is scored with them
unchanged, including the runs on other sizes.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from matcomp.analysis.progress import L_MASK, heads_over_uniform, progress_table
from matcomp.data import second_moment
from matcomp.runs.run import Run

SPAN = 150  # steps of the trailing mean (3 checkpoints at the cpu progress runs' 50)
ARM = 500  # the alarm is armed from this step on
WINDOW = 2000  # an alarm is a hit when the drop follows within this many steps
MARGIN = 0.1  # the fitted threshold is raised by this fraction
SIGNALS = ("attention", "loss")
FROZEN = {"attention": 0.1661, "loss": 0.03485}  # fit_threshold on seeds 0-4 of the cpu progress runs


def signal(table: pd.DataFrame, name: str, n_rows: int, n_cols: int, level: float) -> pd.Series:
    """Signal ``name`` of a progress table (one row per checkpoint, indexed by step) of a run on
    n_rows × n_cols matrices with copying level ``level``, as a trailing mean over ``SPAN`` steps."""
    if name == "attention":
        raw = heads_over_uniform(table, n_rows, n_cols).max(axis=1) - 1
    elif name == "loss":
        raw = 1 - table[L_MASK] / level
    else:
        raise ValueError(f"signal must be one of {SIGNALS}; got {name!r}")
    spacing = int(pd.Series(table.index).diff().median()) if len(table) > 1 else SPAN
    return raw.rolling(max(SPAN // spacing, 1), min_periods=1).mean()


def alarm_step(values: pd.Series, threshold: float) -> int | None:
    """The first checkpoint from ``ARM`` on where ``values`` exceeds ``threshold``, or None. Reads each
    checkpoint's value alone, so the answer at t depends on nothing after t."""
    above = values[(values.index >= ARM) & (values > threshold)]
    return int(above.index[0]) if len(above) else None


def fit_threshold(signals: list[tuple[pd.Series, int]]) -> float:
    """The smallest threshold that raises no alarm more than ``WINDOW`` steps before the drop on any of
    ``signals`` ((signal, drop step) of runs that drop), raised by ``MARGIN``."""
    quiet = [values[(values.index >= ARM) & (values.index < drop - WINDOW)] for values, drop in signals]
    highest = max(float(q.max()) for q in quiet if len(q))
    return highest * (1 + MARGIN)


@dataclass(frozen=True)
class ScoredRun:
    """One run scored by one rule: the alarm, the drop (None: none within the budget) and the outcome."""

    alarm: int | None
    drop: int | None

    @property
    def outcome(self) -> str:
        if self.drop is None:
            return "false alarm (no drop)" if self.alarm is not None else "quiet (no drop)"
        if self.alarm is None or self.alarm > self.drop:
            return "miss"
        return "hit" if self.drop - self.alarm <= WINDOW else "false alarm (early)"

    @property
    def lead(self) -> int | None:
        """Steps from the alarm to the drop, for a hit."""
        return self.drop - self.alarm if self.outcome == "hit" else None  # type: ignore[operator]


def score(tables: dict[int, tuple[pd.DataFrame, int | None]], n_rows: int, n_cols: int, level: float,
          thresholds: dict[str, float] | None = None) -> pd.DataFrame:
    """Every run of ``tables`` (seed -> (progress table, drop step or None)) under both rules at
    ``thresholds`` (default ``FROZEN``): one row per seed and signal, with the alarm, the drop, the
    verdict, the lead in steps and as a fraction of the plateau (lead / drop step)."""
    thresholds = thresholds or FROZEN
    rows = []
    for seed, (table, drop) in tables.items():
        for name in SIGNALS:
            out = ScoredRun(alarm_step(signal(table, name, n_rows, n_cols, level), thresholds[name]), drop)
            rows.append({"seed": seed, "signal": name, "alarm step": out.alarm, "drop step": drop,
                         "verdict": out.outcome, "lead (steps)": out.lead,
                         "lead / plateau": None if out.lead is None or drop is None else out.lead / drop})
    table = pd.DataFrame(rows).set_index(["seed", "signal"])
    return table.astype({"alarm step": "Int64", "drop step": "Int64", "lead (steps)": "Int64",
                         "lead / plateau": "Float64"})


def score_runs(runs: dict[int, Run], samples: int = 256, thresholds: dict[str, float] | None = None) -> pd.DataFrame:
    """``score`` of runs of one task (seed -> run), on their progress tables (``progress_table``)."""
    data = next(iter(runs.values())).config.data
    tables = {seed: (progress_table(run, samples), run.drop.half_step) for seed, run in runs.items()}
    return score(tables, data.n_rows, data.n_cols, second_moment(data), thresholds)


def summary(scores: pd.DataFrame) -> pd.DataFrame:
    """Per signal: runs, hits, false alarms, misses, and the median and range of the hits' leads."""
    rows = {}
    for name, part in scores.groupby(level="signal"):
        verdicts = part["verdict"]
        leads = part["lead (steps)"].dropna().astype(float)
        rows[name] = {"runs": len(part), "hits": int((verdicts == "hit").sum()),
                      "false alarms": int(verdicts.str.startswith("false").sum()),
                      "misses": int((verdicts == "miss").sum()),
                      "median lead (steps)": leads.median() if len(leads) else None,
                      "lead range (steps)": f"{leads.min():.0f}–{leads.max():.0f}" if len(leads) else "",
                      "median lead / plateau": part["lead / plateau"].dropna().astype(float).median()}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("signal")


def lead_over_loss(scores: pd.DataFrame) -> pd.Series:
    """Per run where both rules hit: the attention alarm's lead minus the loss alarm's (steps; > 0:
    attention announces the drop first)."""
    both = scores["lead (steps)"].unstack("signal").dropna().astype(float)
    return (both["attention"] - both["loss"]).rename("lead over the loss (steps)")
