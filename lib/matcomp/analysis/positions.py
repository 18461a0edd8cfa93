"""Permuting positional embeddings (NeurIPS §3.2.1).

A permutation π is passed as ``position_ids``: the token at position p then reads the embedding
of position π(p), exactly as the reference code's ``W[:S] = W[:S][π]`` on the weights (verified
in §4.3), without editing them. The paper draws one unseeded permutation; here each is seeded
and the losses are averaged over several.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd
import torch

from matcomp import checks
from matcomp.analysis.evaluation import losses
from matcomp.data import Batch
from matcomp.models.bert import MatrixBert
from matcomp.seeding import permutation_generator


def position_permutation(n: int, seed: int) -> torch.Tensor:
    """A random permutation of 0..n-1, (n,) int64, the same for the same ``seed``.

    >>> position_permutation(5, seed=0).sort().values.tolist()
    [0, 1, 2, 3, 4]
    """
    n = checks.count(n, "position_permutation: n")
    return torch.randperm(n, generator=permutation_generator(seed, "position_permutation: seed"))


def permuted_losses(model: MatrixBert, batch: Batch, seeds: Iterable[int] = range(5)) -> pd.DataFrame:
    """L, L_obs, L_mask and mask_value with positions permuted, one permutation per seed.

    One row per metric; columns ``unpermuted`` (the ordinary losses), and the ``mean``, ``std``
    (sample standard deviation, NaN for one seed), ``min`` and ``max`` over the seeds.
    """
    seeds = list(seeds)
    if not seeds:
        raise ValueError("seeds must hold at least one seed")
    S = batch.ids.shape[1]
    per_seed = pd.DataFrame([losses(model, batch, position_ids=position_permutation(S, seed).unsqueeze(0))
                             for seed in seeds], index=pd.Index(seeds, name="seed"))
    table = per_seed.agg(["mean", "std", "min", "max"]).T
    table.insert(0, "unpermuted", pd.Series(losses(model, batch)))
    table.index.name = "metric"
    return table
