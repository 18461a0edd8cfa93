"""One configuration over several seeds: where each run's plateau ends (NeurIPS Fig. 2 over seeds)."""

from __future__ import annotations

import pandas as pd

from matcomp.config import RunConfig
from matcomp.runs.run import Run


def seeds_from(cfg: RunConfig, count: int, skip: int = 0) -> range:
    """``count`` seeds from ``cfg``'s own on, after the first ``skip``: the seeds of a several-seed part.

    >>> from matcomp.presets import preset_config
    >>> seeds_from(preset_config("cpu", {"train.seed": 3}), 2), seeds_from(preset_config("cpu"), 8, skip=5)
    (range(3, 5), range(5, 13))
    """
    return range(cfg.train.seed + skip, cfg.train.seed + skip + count)


def seeds_at(cfg: RunConfig, offsets) -> list[int]:
    """The seeds ``offsets`` past ``cfg``'s own: the chosen seeds of a several-seed part.

    >>> from matcomp.presets import preset_config
    >>> seeds_at(preset_config("cpu", {"train.seed": 2}), (0, 3, 6))
    [2, 5, 8]
    """
    return [cfg.train.seed + offset for offset in offsets]


def censored(steps: pd.Series, budget: int) -> pd.Series:
    """Drop steps (missing where a run has none within ``budget``) as floats, a missing one counted as
    ``budget`` + 1: later than any drop within the budget, so that runs with and without a drop compare.

    >>> censored(pd.Series([5060, None], dtype="Int64"), 20000).tolist()
    [5060.0, 20001.0]
    """
    return steps.astype("Float64").fillna(budget + 1).astype(float)


def seed_configs(cfg: RunConfig, seeds) -> dict[int, RunConfig]:
    """``cfg`` at each of ``seeds``: the runs of every chapter that reads several seeds."""
    return {seed: cfg.override({"train.seed": seed}) for seed in seeds}


def trained_on(summary: dict) -> str:
    """The machine of a run's ``complete.json`` summary, as "AMD EPYC, 1 thread", or its GPU where it trained
    on one, or its ``trained_on`` where it moved between machines; a field recorded as null (a run assembled
    from a GPU loan's files) reads as unrecorded.

    >>> trained_on({"machine": {"cpu": "AMD EPYC", "threads": 1}}), trained_on({})
    ('AMD EPYC, 1 thread', 'unrecorded')
    >>> trained_on({"device": "cuda", "machine": {"cpu": None, "threads": None, "gpu": "NVIDIA H200"}})
    'NVIDIA H200'
    >>> trained_on({"device": "cpu", "trained_on": "an NVIDIA H200 (steps 0–25,000), then a CPU (to 28,000)"})[:14]
    'an NVIDIA H200'
    >>> trained_on({"trained_on": "an H200", "retraced": {"steps": [4000], "gap": 0.001, "machine": {"cpu": "AMD"}}})
    'an H200; its checkpoint 4,000 retrained on AMD, within 0.1% of its loss'
    """
    return _machine_text(summary) + _retraced_text(summary.get("retraced"))


def _machine_text(summary: dict) -> str:
    if summary.get("trained_on"):
        return summary["trained_on"]
    machine = summary.get("machine") or {}
    if summary.get("device", "cpu") != "cpu" and machine.get("gpu"):
        return machine["gpu"]
    threads = machine.get("threads")
    count = f", {threads} thread{'s' if threads != 1 else ''}" if threads else ""
    return (machine.get("cpu") or "unrecorded") + count


def _retraced_text(retraced: dict | None) -> str:
    """Where checkpoints were added to a run from a retraining (``runs.shipped.add_checkpoints``), and how closely
    it retraced the run: "; its checkpoint 4,000 retrained on AMD EPYC, bit for bit"."""
    if not retraced:
        return ""
    steps = ", ".join(f"{step:,}" for step in retraced["steps"])
    how = "bit for bit" if retraced["gap"] == 0 else f"within {retraced['gap']:.1%} of its loss"
    machine = retraced.get("machine") or {}
    where = machine.get("gpu") or machine.get("cpu") or "another machine"
    return f"; its checkpoint{'s' * (len(retraced['steps']) > 1)} {steps} retrained on {where}, {how}"


def drop_over_seeds(runs: dict[int, Run]) -> pd.DataFrame:
    """Plateau, drop steps and final L_mask of each run of ``runs`` (seed -> run, e.g. the runs of
    ``seed_configs``), and the machine each was trained on (its ``complete.json``): float-level
    differences between machines move a drop step, so a table of drop steps says where each was measured."""
    rows = []
    for seed, run in runs.items():
        d = run.drop
        rows.append({"seed": seed, "run": run.config.run_id, "plateau": d.plateau, "drop step": d.half_step,
                     "10x step": d.tenfold_step, "final L_mask": d.final, "trained on": trained_on(run.summary)})
    return pd.DataFrame(rows).set_index("seed").astype({"drop step": "Int64", "10x step": "Int64"})


def km_median(steps, budget: int) -> float | None:
    """The Kaplan–Meier median drop step of runs trained ``budget`` steps, a missing step (no drop) being
    censored at ``budget``: the first drop step where the estimated share still on the plateau is at or
    below one half, so that a seed that never drops counts as later than every drop instead of being
    left out. None when more than half stay on the plateau (the median lies beyond the budget).

    >>> km_median([5000, 7000, None, 9000], 20000), km_median([5000, None, None], 20000)
    (7000.0, None)
    """
    times = sorted(float(s) for s in steps if not pd.isna(s))
    at_risk, surviving = len(list(steps)), 1.0
    for time in times:  # every drop comes before the censoring at the budget
        surviving *= 1 - 1 / at_risk
        at_risk -= 1
        if surviving <= 0.5 + 1e-12:
            return time
    return None
