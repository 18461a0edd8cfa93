"""How far one seed's drop step moves under a change at the level of floating-point rounding: the same seed,
the same batches, one initial weight moved by one unit in the last place (``train.init_nudge``). The paper
reports one run's drop step (≈ 15,000, NeurIPS Fig. 2); this spread says how much one draw can tell."""

from __future__ import annotations

import pandas as pd

from matcomp.config import RunConfig
from matcomp.models.factory import build_model
from matcomp.runs.run import Run

SEEDS = 2  # seeds nudged: the first two of the drop-step distribution
AFTER_DROP = 250  # steps a nudged run trains past its drop (``train.stop_after_drop``): its drop step is all it gives

# the first weight of eight tensors that every forward pass reads (the MASK token's embedding, position 0, ...):
# a weight no pass reads (an unused token's row) would leave the run exactly as it was
NUDGED = ("bert.embeddings.word_embeddings.weight", "bert.embeddings.position_embeddings.weight",
          "bert.encoder.layer.0.attention.self.query.weight", "bert.encoder.layer.0.intermediate.dense.weight",
          "bert.encoder.layer.1.attention.self.key.weight", "bert.encoder.layer.2.attention.self.value.weight",
          "bert.encoder.layer.3.output.dense.weight", "readout.weight")


def nudge_indices(cfg: RunConfig, count: int = len(NUDGED)) -> dict[str, int]:
    """The ``train.init_nudge`` of each of the first ``count`` tensors of ``NUDGED`` that ``cfg``'s model has
    (tensor name -> the index, from 1, of its first weight among the model's parameters)."""
    model = build_model(cfg.model, seed=cfg.train.seed)
    starts, start = {}, 0
    for name, p in model.named_parameters():
        starts[name] = start + 1
        start += p.numel()
    present = [name for name in NUDGED if name in starts]
    if count > len(present):
        raise ValueError(f"count must be at most the {len(present)} tensors of NUDGED this model has; got {count}")
    return {name: starts[name] for name in present[:count]}


def nudged_configs(cfg: RunConfig, seeds, count: int) -> dict[tuple[int, str], RunConfig]:
    """``cfg`` at each of ``seeds`` with each of ``count`` weights nudged ((seed, tensor) -> config), each stopping
    ``AFTER_DROP`` steps past its drop."""
    return {(seed, name): cfg.override({"train.seed": seed, "train.init_nudge": k, "train.stop_after_drop": AFTER_DROP})
            for seed in seeds for name, k in nudge_indices(cfg, count).items()}


def drop_spread(base: dict[int, Run], nudged: dict[tuple[int, str], Run]) -> pd.DataFrame:
    """One row a seed: its own drop step (``base``, seed -> run), the drop steps of its nudged runs (``nudged``,
    (seed, tensor) -> run), and their spread: lowest, highest, range and the range over the seed's own drop step.
    A run with no drop within its budget has none (NaN) and is left out of the spread, counted in ``no drop``."""
    rows = {}
    for seed, run in base.items():
        steps = pd.Series({name: r.drop.half_step for (s, name), r in nudged.items() if s == seed}, dtype="Float64")
        drops = steps.dropna()
        own = run.drop.half_step
        rows[seed] = {"own drop step": own, "nudged runs": len(steps), "no drop": int(steps.isna().sum()),
                      "lowest": drops.min(), "median": drops.median(), "highest": drops.max(),
                      "range": drops.max() - drops.min(), "range / own": (drops.max() - drops.min()) / own}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("seed")
