"""One configuration over several seeds: where each run's plateau ends (NeurIPS Fig. 2 over seeds)."""

from __future__ import annotations

import pandas as pd

from matcomp.config import RunConfig
from matcomp.runs.store import get_or_train


def seeds_from(cfg: RunConfig, count: int, skip: int = 0) -> range:
    """``count`` seeds from ``cfg``'s own on, after the first ``skip``: the seeds of a several-seed part.

    >>> from matcomp.presets import preset
    >>> seeds_from(preset("cpu", {"train.seed": 3}), 2), seeds_from(preset("cpu"), 8, skip=5)
    (range(3, 5), range(5, 13))
    """
    return range(cfg.train.seed + skip, cfg.train.seed + skip + count)


def seed_configs(cfg: RunConfig, seeds) -> dict[int, RunConfig]:
    """``cfg`` at each of ``seeds``: the runs of every chapter that reads several seeds."""
    return {seed: cfg.override({"train.seed": seed}) for seed in seeds}


def drop_over_seeds(cfg: RunConfig, seeds, progress: bool = False) -> pd.DataFrame:
    """Plateau, drop steps and final L_mask of ``cfg`` for each seed (trained if not stored)."""
    rows = []
    for seed, seed_cfg in seed_configs(cfg, seeds).items():
        run = get_or_train(seed_cfg, progress=progress)
        d = run.drop
        rows.append({"seed": seed, "run": run.config.run_id, "plateau": d.plateau, "drop step": d.half_step,
                     "10x step": d.tenfold_step, "final L_mask": d.final})
    return pd.DataFrame(rows).set_index("seed").astype({"drop step": "Int64", "10x step": "Int64"})
