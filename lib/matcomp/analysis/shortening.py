"""Shortening the plateau (beyond the paper): the changes compared with plain training, and the
comparison of their drop steps over seeds."""

from __future__ import annotations

import pandas as pd

from matcomp.config import RunConfig
from matcomp.runs.store import get_or_train

MIN_BUDGET = 200  # fewest steps of a changed run in the shortening chapter


def shortening_defaults(cfg: RunConfig) -> dict[str, dict]:
    """The changes the shortening chapter compares with plain training, as overrides scaled to
    ``cfg``'s steps S: an attention bias of 2 falling to 0 over S/5 steps (runs of 2S/5 steps) or over
    S/10 steps (runs of 3S/10), and twice the learning rate (runs of 3S/10); every run at least
    ``MIN_BUDGET`` steps, so that the drop detector sees a plateau. On the cpu preset: bias over 4,000
    of 8,000 steps or over 2,000 of 6,000, and lr 2e-3 for 6,000 steps."""
    steps = cfg.train.steps
    bias = {f"bias, {label}": {"train.attention_bias": 2.0, "train.attention_bias_steps": steps // fade,
                               "train.steps": max(budget * steps // 10, MIN_BUDGET)}
            for label, fade, budget in (("long", 5, 4), ("short", 10, 3))}
    return bias | {"lr × 2": {"train.lr": 2 * cfg.train.lr, "train.steps": max(3 * steps // 10, MIN_BUDGET)}}


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


def seed_curves(cfg: RunConfig, changed: dict[str, RunConfig], seeds) -> tuple[dict[int, dict[str, pd.DataFrame]],
                                                                                dict[int, float]]:
    """For each seed, the metrics of plain training (``cfg``, cut at the longest changed run's steps,
    named "plain") and of every changed config (``changed``: name -> config) at that seed, and plain
    training's plateau at that seed: what the shortening chapter plots seed by seed."""
    end = max(c.train.steps for c in changed.values())
    curves, levels = {}, {}
    for seed in seeds:
        base = get_or_train(cfg.override({"train.seed": seed}), progress=False)
        curves[seed] = {"plain": base.metrics[base.metrics.step <= end]}
        curves[seed] |= {name: get_or_train(c.override({"train.seed": seed}), progress=False).metrics
                         for name, c in changed.items()}
        levels[seed] = base.drop.plateau
    return curves, levels


def bias_ends(changed: dict[str, RunConfig]) -> dict[str, int]:
    """The step where each changed run's attention bias reaches 0 (runs without a bias left out)."""
    return {name: c.train.attention_bias_steps for name, c in changed.items() if c.train.attention_bias}
