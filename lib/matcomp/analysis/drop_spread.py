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


def nudged_steps(nudged: dict[tuple[int, str], Run]) -> pd.DataFrame:
    """The drop step of each nudged run ((seed, tensor) -> run), indexed by seed and the nudge's number (1, 2, ...
    in ``NUDGED``'s order), with the tensor nudged beside it; NaN where a run has no drop within its budget."""
    rows = [(seed, NUDGED.index(name) + 1, name, run.drop.half_step) for (seed, name), run in nudged.items()]
    table = pd.DataFrame(rows, columns=["seed", "nudge", "tensor", "drop step"]).set_index(["seed", "nudge"])
    return table.astype({"drop step": "Float64"})


def spread_table(steps: pd.DataFrame, own: pd.Series) -> pd.DataFrame:
    """One row a seed: its own drop step (``own``, seed -> step), how many nudged runs it has and how many of them
    have no drop, and the spread of the drops of its nudged runs (``nudged_steps``): lowest, median, highest, their
    range, and the range over the seed's own drop step.

    >>> steps = pd.DataFrame({"drop step": [5067.0, 5072.0, None]}, index=pd.MultiIndex.from_tuples(
    ...     [(0, 1), (0, 2), (0, 3)], names=["seed", "nudge"]))
    >>> spread_table(steps, pd.Series({0: 5060})).loc[0, ["nudged runs", "no drop", "range", "range / own"]].tolist()
    [3.0, 1.0, 5.0, 0.000988...]
    """
    rows = {}
    for seed, own_step in own.items():
        part = steps.xs(seed, level="seed")["drop step"].astype(float)
        drops = part.dropna()
        rows[seed] = {"own drop step": own_step, "nudged runs": len(part), "no drop": int(part.isna().sum()),
                      "lowest": drops.min(), "median": drops.median(), "highest": drops.max(),
                      "range": drops.max() - drops.min(), "range / own": (drops.max() - drops.min()) / own_step}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("seed")
