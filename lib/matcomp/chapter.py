"""What every chapter of the book does first: turn its papermill parameters into a run config,
and pick the checkpoints it analyses from the run's own drop.

A chapter's ``parameters`` cell holds literals (``preset = None``, ``seed = None``, ``overrides = ""``);
``chapter_config`` resolves ``None`` from the environment, so that one variable switches every
chapter (``MATCOMP_PRESET=smoke`` in CI), and papermill's ``-p preset smoke -p seed 3`` switches one.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from textwrap import fill

import pandas as pd

from matcomp.config import RunConfig
from matcomp.drop import smooth
from matcomp.presets import preset as named_preset
from matcomp.run import Run
from matcomp.store import get_or_train

ENV_PRESET, ENV_SEED, ENV_SET = "MATCOMP_PRESET", "MATCOMP_SEED", "MATCOMP_SET"
DEFAULT_PRESET = "cpu"
MIN_BUDGET = 200  # fewest steps of a changed run in the shortening chapter
ON_PLATEAU = 0.9  # a checkpoint is on the plateau while smoothed L_mask >= 0.9 x the plateau level


def parse_overrides(text: str) -> dict[str, str]:
    """``"train.lr=3e-4, model.hidden=32"`` -> ``{"train.lr": "3e-4", "model.hidden": "32"}``.

    >>> parse_overrides("train.lr=3e-4, data.p_mask=0.2")
    {'train.lr': '3e-4', 'data.p_mask': '0.2'}
    >>> parse_overrides("data.sizes=[3, 4], data.rank=1")  # a comma starts a new pair only before FIELD=
    {'data.sizes': '[3, 4]', 'data.rank': '1'}
    """
    out = {}
    for item in filter(None, (part.strip() for part in re.split(r",(?=\s*[\w.]+\s*=)", text))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"overrides must be comma-separated FIELD=VALUE pairs (e.g. train.lr=3e-4); got {item!r}")
        out[key.strip()] = value.strip()
    return out


def chapter_config(preset: str | None = None, seed: int | None = None,
                   overrides: str | dict | None = None, variant: str = "") -> RunConfig:
    """The run config of a chapter's parameters.

    ``preset`` None -> ``$MATCOMP_PRESET``, else ``cpu``; ``seed`` None -> ``$MATCOMP_SEED``, else the
    preset's; ``overrides`` (a dict or ``"field=value,..."``) are applied after those of ``$MATCOMP_SET``.
    A ``variant`` ("gpt") takes the preset of that name at the same scale (``cpu`` -> ``cpu_gpt``).
    """
    name = preset or os.environ.get(ENV_PRESET) or DEFAULT_PRESET
    if variant and not name.endswith(f"_{variant}"):
        name = f"{name}_{variant}"
    changes: dict[str, object] = parse_overrides(os.environ.get(ENV_SET, ""))
    changes.update(parse_overrides(overrides) if isinstance(overrides, str) else overrides or {})
    if seed is None and os.environ.get(ENV_SEED):
        seed = os.environ[ENV_SEED]
    if seed is not None:
        changes["train.seed"] = seed
    return named_preset(name, changes)


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


def drop_over_seeds(cfg: RunConfig, seeds, progress: bool = False) -> pd.DataFrame:
    """Plateau, drop steps and final L_mask of ``cfg`` for each seed (trained if not stored)."""
    rows = []
    for seed in seeds:
        run = get_or_train(cfg.override({"train.seed": seed}), progress=progress)
        d = run.drop
        rows.append({"seed": seed, "run": run.config.run_id, "plateau": d.plateau, "drop step": d.half_step,
                     "10x step": d.tenfold_step, "final L_mask": d.final})
    return pd.DataFrame(rows).set_index("seed").astype({"drop step": "Int64", "10x step": "Int64"})


def shortening_defaults(cfg: RunConfig) -> dict[str, str]:
    """The changes the shortening chapter compares with plain training, as override strings scaled to
    ``cfg``'s steps S: an attention bias of 2 falling to 0 over S/5 steps (runs of 2S/5 steps) or over
    S/10 steps (runs of 3S/10), and twice the learning rate (runs of 3S/10); every run at least
    ``MIN_BUDGET`` steps, so that the drop detector sees a plateau. On the cpu preset: bias over 4,000
    of 8,000 steps or over 2,000 of 6,000, and lr 2e-3 for 6,000 steps."""
    steps = cfg.train.steps
    bias = {f"bias, {label}": f"train.attention_bias=2.0, train.attention_bias_steps={steps // fade}, "
                              f"train.steps={max(budget * steps // 10, MIN_BUDGET)}"
            for label, fade, budget in (("long", 5, 4), ("short", 10, 3))}
    return bias | {"lr × 2": f"train.lr={2 * cfg.train.lr:g}, train.steps={max(3 * steps // 10, MIN_BUDGET)}"}


def drop_comparison(plain: pd.DataFrame, changed: pd.DataFrame, budget: int) -> pd.DataFrame:
    """Per seed, the drop step of ``plain`` and ``changed`` (tables of ``drop_over_seeds``) and the change.

    ``changed`` ran ``budget`` steps, so a run of it without a drop is only known to drop after
    ``budget`` (its cell is empty and the "dropped by budget" flag says so); a plain drop after
    ``budget`` is kept, since plain runs go on longer."""
    table = pd.DataFrame({"plain": plain["drop step"], "changed": changed["drop step"]}).astype("Int64")
    table["change"] = table["changed"] - table["plain"]
    table["plain dropped by budget"] = table["plain"].le(budget).fillna(False).astype(bool)
    table["changed dropped by budget"] = table["changed"].notna()
    return table


def drop_summary(table: pd.DataFrame, budget: int) -> pd.DataFrame:
    """Spread of a ``drop_comparison`` table: for plain and changed training, how many seeds drop by
    ``budget`` and the mean, std, min and max drop step over the seeds where *both* dropped within it."""
    both = table[table["plain dropped by budget"] & table["changed dropped by budget"]]
    rows = {}
    for side in ("plain", "changed"):
        steps = both[side].astype(float)
        dropped = int(table[f"{side} dropped by budget"].sum())
        rows[side] = {"budget": budget, "dropped within it": f"{dropped}/{len(table)}",
                      "seeds compared": len(both), "mean drop step": steps.mean(), "std": steps.std(),
                      "min": steps.min(), "max": steps.max()}
    change = both["change"].astype(float)
    rows["change"] = {"budget": budget, "dropped within it": "", "seeds compared": len(both),
                      "mean drop step": change.mean(), "std": change.std(), "min": change.min(), "max": change.max()}
    numbers = ["budget", "seeds compared", "mean drop step", "std", "min", "max"]
    return pd.DataFrame.from_dict(rows, orient="index").astype(dict.fromkeys(numbers, float))
