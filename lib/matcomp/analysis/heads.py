"""The attention-head taxonomy (NeurIPS §3.2.2 "Structure in Attention Heads",
Figs. 4, 5, 22-24, App. L-M).

The paper names head families by looking at averaged attention maps. Here each family gets a
score: an attention mass, averaged over queries and matrices (every (matrix, query) pair weighs
the same), computed from per-matrix maps P (N, H, S, S) (query = row index) and the mask. For a
query q at entry (i, j) of an m × n matrix (S = m·n):

=================  =====================================================  =================
score              mass of P[q, :] on the keys                            uniform baseline
=================  =====================================================  =================
``row``            in row i, q itself excluded; at every query but        (n - 1) / S
                   those of ``masked_row`` (so that row heads and
                   masked-row heads are told apart)
``column``         in column j, q itself excluded                         (m - 1) / S
``self``           q itself                                               1 / S
``observed``       observed entries                                       mean |Ω| / S
``mask``           missing (MASK) entries; 1 - ``observed``               1 - mean |Ω| / S
``masked_row``     the single observed entry of row i; only queries that  1 / S
                   are missing in a row with exactly one observed entry
                   (NaN if there are none, e.g. a mask without such rows)
``longest_column`` the column with the longest vertical run of observed   m / S
                   entries (``longest_column``; ties go to the smallest
                   column index)
=================  =====================================================  =================

The baseline is the score of uniform attention 1/S: a score well above it is enrichment.
``classify_heads`` turns scores into families with explicit thresholds. Heads are (layer, head)
counted from 0; the paper's (l, h) is (l - 1, h - 1).
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd
import torch

from matcomp.analysis.evaluation import losses, predict
from matcomp.analysis.interventions import ablate_heads
from matcomp.data import Batch, structured_mask
from matcomp.models.bert import MatrixBert
from matcomp.models.hooks import AttentionRecord, attention_hooks
from matcomp.runs.run import Run

SCORES = ("row", "column", "self", "observed", "mask", "masked_row", "longest_column")
FAMILIES = ("identity", "row", "column", "masked-row", "longest-contiguous-column", "mask-ignore", "other")
FAMILY_SCORE = {"identity": "self", "row": "row", "column": "column", "masked-row": "masked_row",
                "longest-contiguous-column": "longest_column"}
GROUP_METRICS = ("L", "L_obs", "L_mask")


def longest_runs(observed: torch.Tensor) -> torch.Tensor:
    """(N, n): for each column of each mask (N, m, n), the longest run of consecutive observed rows."""
    run = best = torch.zeros(observed.shape[0], observed.shape[2], dtype=torch.long)
    for i in range(observed.shape[1]):
        run = (run + 1) * observed[:, i]
        best = torch.maximum(best, run)
    return best


def longest_column(observed: torch.Tensor) -> torch.Tensor:
    """(N,): the column with the longest vertical run of observed entries (first such column on ties).

    >>> longest_column(fig5_mask(7, 7)[None]).tolist(), longest_column(fig5_mask(7, 7, swapped=True)[None]).tolist()
    ([1], [5])
    """
    return longest_runs(observed).argmax(-1)  # argmax returns the first maximal index


def _observed(observed: torch.Tensor, maps: torch.Tensor) -> torch.Tensor:
    """The mask as (N, m, n) bool, checked against maps (N, H, S, S)."""
    if maps.dim() != 4 or maps.shape[-1] != maps.shape[-2]:
        raise ValueError(f"maps must have shape (N, H, S, S); got {tuple(maps.shape)}")
    observed = observed.bool()
    if observed.dim() == 2:
        observed = observed.expand(maps.shape[0], *observed.shape)
    N, m, n = observed.shape
    if N != maps.shape[0] or m * n != maps.shape[-1]:
        raise ValueError(f"observed must have shape (N, m, n) or (m, n) with N = {maps.shape[0]} and "
                         f"m·n = S = {maps.shape[-1]}; got {tuple(observed.shape)}")
    return observed


def _mass(maps: torch.Tensor, keys: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """(H,): mass of maps (N, H, S, S) on ``keys`` (broadcastable to (N, S, S)), averaged over
    ``queries`` (broadcastable to (N, S))."""
    per_query = (maps * keys.unsqueeze(-3)).sum(-1)  # (N, H, S)
    weight = queries.unsqueeze(-2).expand_as(per_query).float()
    return (per_query * weight).sum((0, 2)) / weight.sum((0, 2))


def map_scores(maps: torch.Tensor, observed: torch.Tensor) -> pd.DataFrame:
    """The scores (columns ``SCORES``) of each head (rows, index ``head``) of one layer, from its
    per-matrix maps (N, H, S, S) and the masks (N, m, n) or one shared mask (m, n)."""
    observed = _observed(observed, maps)
    N, m, n = observed.shape
    S = m * n
    row, col = torch.arange(S) // n, torch.arange(S) % n
    same_row = row[:, None] == row[None, :]  # (S, S)
    same_col = col[:, None] == col[None, :]
    eye = torch.eye(S, dtype=torch.bool)
    flat = observed.reshape(N, 1, S)  # key k observed
    every = torch.ones(1, S, dtype=torch.bool)
    lone = (observed.sum(-1) == 1)[:, row] & ~flat[:, 0]  # (N, S): missing, in a row with one observed entry
    best = longest_column(observed)  # (N,)
    sets = {
        "row": (same_row & ~eye, ~lone),
        "column": (same_col & ~eye, every),
        "self": (eye, every),
        "observed": (flat, every),
        "mask": (~flat, every),
        "masked_row": (flat & same_row, lone),
        "longest_column": ((col[None, :] == best[:, None]).unsqueeze(1), every),
    }
    maps = maps.float()
    return pd.DataFrame({name: _mass(maps, keys, queries).numpy() for name, (keys, queries) in sets.items()},
                        index=pd.RangeIndex(maps.shape[1], name="head"))


def score_baselines(observed: torch.Tensor) -> dict[str, float]:
    """Each score of uniform attention 1/S on masks (N, m, n) or (m, n) (see the module's table)."""
    observed = observed.bool().reshape(-1, *observed.shape[-2:])
    m, n = observed.shape[-2:]
    S = m * n
    seen = observed.float().sum((1, 2)).mean().item() / S
    return {"row": (n - 1) / S, "column": (m - 1) / S, "self": 1 / S, "observed": seen, "mask": 1 - seen,
            "masked_row": 1 / S, "longest_column": m / S}


def _record(model: MatrixBert, batch: Batch) -> AttentionRecord:
    with attention_hooks(model, record=True) as record:
        predict(model, batch.ids)
    assert record is not None  # record=True yields one
    return record


def mean_maps(model: MatrixBert, batch: Batch) -> torch.Tensor:
    """(L, H, S, S): every head's attention probabilities averaged over the batch (query = row
    index), the grid of NeurIPS Fig. 4 (random masks) and Fig. 5 (one structured mask)."""
    return _record(model, batch).mean()


def head_scores(model: MatrixBert, batch: Batch) -> pd.DataFrame:
    """The scores (columns ``SCORES``) of every head, one row per (layer, head), on ``batch``."""
    record = _record(model, batch)
    layers = [map_scores(record.maps(i), batch.observed) for i in range(model.cfg.layers)]
    return pd.concat(layers, keys=range(model.cfg.layers), names=["layer", "head"])


def classify_heads(scores: pd.DataFrame, baselines: dict[str, float], mass: float = 0.5,
                   enrichment: float = 2.0, mask_ratio: float = 0.25) -> pd.DataFrame:
    """``scores`` with a ``family`` and an ``ignores_mask`` column in front.

    A head has a pattern F (identity/self, row, column, masked-row, longest-contiguous-column) if
    its score of F is at least ``mass`` and at least ``enrichment`` times the uniform baseline. It
    ignores MASK if its ``mask`` score is at most ``mask_ratio`` times the baseline. The family is
    the first that holds in the order of ``FAMILIES``: identity, row, column, masked-row,
    longest-contiguous-column, mask-ignore, other. So the paper's mask-ignore heads, column heads
    that skip masked rows, come out as ``column`` with ``ignores_mask``; ``mask-ignore`` is left
    for heads with no other pattern that avoid MASK keys. The paper's observed-copy heads are
    ``identity`` (they differ only at masked-row queries).
    """
    if not 0 < mass <= 1:
        raise ValueError(f"mass must be in (0, 1]; got {mass}")
    if enrichment < 1:
        raise ValueError(f"enrichment must be >= 1; got {enrichment}")
    if not 0 <= mask_ratio < 1:
        raise ValueError(f"mask_ratio must be in [0, 1); got {mask_ratio}")
    missing = [name for name in SCORES if name not in scores.columns or name not in baselines]
    if missing:
        raise ValueError(f"scores and baselines must hold every score of {SCORES}; missing {missing}")
    has = {family: (scores[name] >= mass) & (scores[name] >= enrichment * baselines[name])
           for family, name in FAMILY_SCORE.items()}
    ignores = (scores["mask"] <= mask_ratio * baselines["mask"]) & (baselines["mask"] > 0)
    has["mask-ignore"] = ignores
    family = pd.Series("other", index=scores.index)
    for name in reversed(FAMILIES[:-1]):  # the earliest family that holds is written last
        family[has[name]] = name
    table = scores.copy()
    table.insert(0, "ignores_mask", ignores)
    table.insert(0, "family", family)
    return table


def classify_model(model: MatrixBert, batch: Batch, mass: float = 0.5, enrichment: float = 2.0,
                   mask_ratio: float = 0.25) -> pd.DataFrame:
    """``classify_heads`` of ``model`` 's head scores on ``batch`` against the uniform baselines of its
    masks: the taxonomy table of one checkpoint, one row per (layer, head)."""
    return classify_heads(head_scores(model, batch), score_baselines(batch.observed), mass, enrichment, mask_ratio)


def with_baselines(table: pd.DataFrame, observed: torch.Tensor, columns) -> pd.DataFrame:
    """``table`` 's ``columns`` (a ``classify_heads`` table) with a last row ("uniform", "") holding each
    score of uniform attention on the masks ``observed`` (its other cells empty), so that a reader sees
    every score beside the level it must beat."""
    baselines = pd.DataFrame([score_baselines(observed)], index=pd.MultiIndex.from_tuples([("uniform", "")]))
    columns = list(columns)
    both = pd.concat([table[columns], baselines[[c for c in columns if c in baselines]]])
    labels = [c for c in columns if c not in baselines]  # the family and the like: empty, not "nan"
    return both.fillna(dict.fromkeys(labels, ""))


def strongest(scores: pd.DataFrame, names=("row", "column", "self")) -> pd.DataFrame:
    """The highest value of each score in ``names`` over all heads, per step (rows) and score
    (columns), from the tidy table of ``scores_over_training``: how strong the best row, column or
    identity head is at each checkpoint."""
    chosen = scores[scores.score.isin(list(names))]
    return chosen.groupby(["step", "score"]).value.max().unstack()


def heads_by_family(table: pd.DataFrame) -> dict[str, list[tuple[int, int]]]:
    """``{family: [(layer, head), ...]}`` from a ``classify_heads`` table indexed by (layer, head)."""
    return {name: [(int(key[0]), int(key[1])) for key in group.index]
            for name, group in table.groupby("family", sort=False)}


def fig5_mask(n_rows: int = 7, n_cols: int = 7, swapped: bool = False) -> torch.Tensor:
    """The structured mask (m, n) of NeurIPS Fig. 5, generalised to m × n (m >= 3, n >= 4).

    Everything is observed except rows m//2 and m-1, each of which keeps one entry: column 1 in
    row m//2 and column n-2 in row m-1 (``swapped``: the other way round). At 7 × 7 this is rows 3
    and 6 keeping columns 1 and 5, the reference ``att_maps.py`` (mask (b) of Fig. 5); ``swapped``
    is our reading of mask (a). The longest contiguous column is the one kept in row m//2.
    """
    if n_rows < 3:
        raise ValueError(f"n_rows must be >= 3 (two distinct masked rows below the first); got {n_rows}")
    if n_cols < 4:
        raise ValueError(f"n_cols must be >= 4 (kept columns 1 and n_cols-2 distinct); got {n_cols}")
    rows, kept = (n_rows // 2, n_rows - 1), (1, n_cols - 2)
    if swapped:
        kept = kept[::-1]
    return structured_mask(n_rows, n_cols, missing_rows=rows, keep=list(zip(rows, kept)))


def group_ablation(model: MatrixBert, batch: Batch, groups: dict[str, Iterable[tuple[int, int]]],
                   mode: str = "uniform") -> pd.DataFrame:
    """NeurIPS App. L: L, L_obs and L_mask without and with ablation of each group of heads
    (``interventions.ablate_heads``), and the ratio with / without; one row per group.

    Both runs use the same attention path (explicit softmax, recorded), so an empty group has ratio
    exactly 1.
    """
    with attention_hooks(model, record=True):
        base = losses(model, batch)
    rows = {}
    for name, heads in groups.items():
        heads = list(heads)
        with ablate_heads(model, heads, mode=mode):
            ablated = losses(model, batch)
        row: dict[str, float] = {"heads": len(heads)}
        for metric in GROUP_METRICS:
            row |= {metric: base[metric], f"{metric} ablated": ablated[metric],
                    f"{metric} ratio": ablated[metric] / base[metric]}
        rows[name] = row
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("group")


def scores_over_training(run: Run, steps: Iterable[int], batch: Batch) -> pd.DataFrame:
    """Tidy head scores across training: columns ``step, layer, head, score, value``, one row per
    (checkpoint, head, score), every checkpoint scored on the same ``batch``."""
    steps = list(steps)
    absent = [step for step in steps if step not in run.steps]
    if absent:
        raise ValueError(f"steps {absent} have no checkpoint; run.steps = {run.steps}")
    frames = []
    for step in steps:
        tidy = head_scores(run.bert(step), batch).melt(ignore_index=False, var_name="score",
                                                             value_name="value").reset_index()
        tidy.insert(0, "step", step)
        frames.append(tidy)
    return pd.concat(frames, ignore_index=True)
