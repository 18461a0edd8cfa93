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
``self_observed``  q itself, at observed queries only (where the paper    1 / S
                   sees identity heads; at a MASK query there is no
                   value to copy)
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
``classify_heads`` turns scores into families with explicit thresholds; the families overlap, as
in the paper (its head (2,1) is both a row and a masked-row head, NeurIPS §3.2.2), so a head gets
every family it meets, and the families it nearly meets are listed beside them. Heads are
(layer, head) counted from 0; the paper's (l, h) is (l - 1, h - 1).
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd
import torch

from matcomp import checks
from matcomp.analysis.evaluation import losses
from matcomp.analysis.interventions import ablate_heads
from matcomp.data import Batch, structured_mask
from matcomp.metrics import LOSSES
from matcomp.models.bert import MatrixBert
from matcomp.models.hooks import attention_hooks, explicit_attention, run_with_cache, stacked
from matcomp.runs.run import Run

SCORES = ("row", "column", "self", "self_observed", "observed", "mask", "masked_row", "longest_column")
FAMILIES = ("identity", "row", "column", "masked-row", "longest-contiguous-column", "mask-ignore")
FAMILY_SCORE = {"identity": "self_observed", "row": "row", "column": "column", "masked-row": "masked_row",
                "longest-contiguous-column": "longest_column"}
ABOVE_NEIGHBOURS = 1.25  # an identity head gives itself this much more than each other key of its row or column
NO_FAMILY = "other"  # the label shown for a head that meets no family's criterion (its set of families is empty)


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


def longest_column_margin(mask: torch.Tensor) -> dict[str, object]:
    """How well one mask (m, n) defines its longest contiguous column: the column, its run of observed
    rows, the longest run of any other column, and the observed entries it shares with the masked
    rows' kept entries (rows with one observed entry), whose keys a masked-row head attends to: where
    they overlap, the two families cannot be told apart on this mask."""
    mask = mask.bool()
    runs = longest_runs(mask[None])[0]
    best = int(runs.argmax())
    kept = [(i, int(mask[i].nonzero()[0])) for i in range(mask.shape[0]) if int(mask[i].sum()) == 1]
    return {"column": best, "run": int(runs[best]), "next run": int(torch.cat([runs[:best], runs[best + 1:]]).max()),
            "shared with masked rows": [(i, j) for i, j in kept if j == best]}


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
    observed, maps = _observed(observed, maps), maps.float()
    sets = _score_sets(observed)
    return pd.DataFrame({name: _mass(maps, *sets[name]).numpy() for name in SCORES},
                        index=pd.RangeIndex(maps.shape[1], name="head"))


def matrix_masses(maps: torch.Tensor, observed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each score's mass summed over each matrix's queries, (N, H, len(SCORES)), and how many queries each
    matrix gives it, (N, len(SCORES)), for one layer's maps (N, H, S, S) and masks (N, m, n): a score is their sums'
    ratio, so that the scores of any resample of the matrices follow without another forward pass
    (``resampled_counts``)."""
    observed, maps, sums, counts = _observed(observed, maps), maps.float(), [], []
    sets = _score_sets(observed)
    for keys, queries in (sets[name] for name in SCORES):
        weight = queries.expand(maps.shape[0], maps.shape[-1]).float()  # (N, S)
        sums.append(((maps * keys.unsqueeze(-3)).sum(-1) * weight.unsqueeze(1)).sum(-1))  # (N, H)
        counts.append(weight.sum(-1))
    return torch.stack(sums, -1), torch.stack(counts, -1)


def _score_sets(observed: torch.Tensor) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Each score's keys (broadcastable to (N, S, S)) and queries (broadcastable to (N, S)) on masks (N, m, n)."""
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
    return {
        "row": (same_row & ~eye, ~lone),
        "column": (same_col & ~eye, every),
        "self": (eye, every),
        "self_observed": (eye, flat[:, 0]),
        "observed": (flat, every),
        "mask": (~flat, every),
        "masked_row": (flat & same_row, lone),
        "longest_column": ((col[None, :] == best[:, None]).unsqueeze(1), every),
    }


def uniform_row_column(m: int, n: int) -> tuple[float, float]:
    """The row and column scores of uniform attention 1/S on m × n matrices: (n − 1)/S and (m − 1)/S.

    >>> uniform_row_column(4, 4)
    (0.1875, 0.1875)
    """
    return (n - 1) / (m * n), (m - 1) / (m * n)


def score_baselines(observed: torch.Tensor) -> dict[str, float]:
    """Each score of uniform attention 1/S on masks (N, m, n) or (m, n) (see the module's table)."""
    observed = observed.bool().reshape(-1, *observed.shape[-2:])
    m, n = observed.shape[-2:]
    S = m * n
    seen = observed.float().sum((1, 2)).mean().item() / S
    row, column = uniform_row_column(m, n)
    return {"row": row, "column": column, "self": 1 / S, "self_observed": 1 / S, "observed": seen,
            "mask": 1 - seen, "masked_row": 1 / S, "longest_column": m / S}


def mean_maps(model: MatrixBert, batch: Batch) -> torch.Tensor:
    """(L, H, S, S): every head's attention probabilities averaged over the batch (query = row
    index), the grid of NeurIPS Fig. 4 (random masks) and Fig. 5 (one structured mask)."""
    return stacked(run_with_cache(model, batch.ids, ["probs"])[1], "probs").mean(1)


def head_scores(model: MatrixBert, batch: Batch) -> pd.DataFrame:
    """The scores (columns ``SCORES``) of every head, one row per (layer, head), on ``batch``."""
    _, cache = run_with_cache(model, batch.ids, ["probs"])
    return cached_scores(cache, batch.observed)


def cached_scores(cache: dict[str, torch.Tensor], observed: torch.Tensor) -> pd.DataFrame:
    """``head_scores`` from a ``run_with_cache`` cache holding every layer's ``probs``: for a caller that
    reads other activations of the same forward pass too."""
    layers = sorted(int(name.split(".")[1]) for name in cache if name.startswith("probs."))
    return pd.concat([map_scores(cache[f"probs.{i}"], observed) for i in layers], keys=layers, names=["layer", "head"])


def classify_heads(scores: pd.DataFrame, baselines: dict[str, float], mass: float = 0.5,
                   enrichment: float = 2.0, identity_enrichment: float = 5.0, mask_ratio: float = 0.25,
                   near: float = 0.8) -> pd.DataFrame:
    """``scores`` with the columns ``families``, ``near_misses`` and ``ignores_mask`` in front.

    A head has a family F (row, column, masked-row, longest-contiguous-column) if its score of F is
    at least ``mass`` and at least ``enrichment`` times the uniform baseline. Identity is one key,
    whose mass cannot be set against a row's: a head is identity if its ``self_observed`` score is
    at least ``identity_enrichment`` times uniform (so the paper's observed-copy heads, which attend
    to themselves only where there is a value, are identity) and ``ABOVE_NEIGHBOURS`` times the mass
    per key it gives the rest of its row and of its column (so a head spread evenly over its row,
    itself included, which gives itself n times uniform, is not). It ignores MASK (mask-ignore) if its
    ``mask`` score is at most ``mask_ratio`` times the baseline. ``families`` holds the frozenset of the
    families a head meets (empty for none; ``family_text`` shows it); ``near_misses`` names, with its score,
    each family it misses although its score reaches ``near`` times every threshold of that family
    (identity's comparison with its row and column is not relaxed)."""
    mass = checks.number(mass, "mass", 0, 1, open_low=True)
    enrichment = checks.number(enrichment, "enrichment", low=1)
    identity_enrichment = checks.number(identity_enrichment, "identity_enrichment", low=1)
    mask_ratio = checks.number(mask_ratio, "mask_ratio", 0, 1, open_high=True)
    near = checks.number(near, "near", 0, 1, open_low=True)
    checks.table(scores, "scores")
    missing = [name for name in SCORES if name not in scores.columns or name not in baselines]
    if missing:
        raise ValueError(f"scores and baselines must hold every score of {SCORES}; missing {missing}")

    per_key = {name: baselines[name] / baselines["self"] for name in ("row", "column")}  # n - 1 and m - 1 keys

    def meets(family: str, slack: float = 1.0) -> pd.Series:
        score = scores[FAMILY_SCORE[family]]
        if family == "identity":
            return ((score >= slack * identity_enrichment * baselines["self_observed"])
                    & (score >= ABOVE_NEIGHBOURS * scores["row"] / per_key["row"])
                    & (score >= ABOVE_NEIGHBOURS * scores["column"] / per_key["column"]))
        return (score >= slack * mass) & (score >= slack * enrichment * baselines[FAMILY_SCORE[family]])

    has = {family: meets(family) for family in FAMILY_SCORE}
    ignores = (scores["mask"] <= mask_ratio * baselines["mask"]) & (baselines["mask"] > 0)
    has["mask-ignore"] = ignores
    nearly = {family: meets(family, near) & ~has[family] for family in FAMILY_SCORE}
    families = [frozenset(f for f in FAMILIES if has[f][head]) for head in scores.index]
    misses = [", ".join(f"{f} {scores.loc[head, FAMILY_SCORE[f]]:.2f}" for f in FAMILY_SCORE if nearly[f][head])
              for head in scores.index]
    table = scores.copy()
    table.insert(0, "ignores_mask", ignores)
    table.insert(0, "near_misses", misses)
    table.insert(0, "families", families)
    return table


def family_counts(tables: dict, families=FAMILIES + (NO_FAMILY,)) -> pd.DataFrame:
    """Heads of each family (rows) in each ``classify_heads`` table (columns, the keys of ``tables``, e.g.
    seeds); a head of several families counts in each, and a head of none as ``NO_FAMILY``."""
    return pd.DataFrame({key: [sum(f in (held or {NO_FAMILY}) for held in table.families) for f in families]
                         for key, table in tables.items()}, index=pd.Index(families, name="family"))


def resampled_counts(cache: dict[str, torch.Tensor], observed: torch.Tensor, draws: int,
                     generator: torch.Generator, **thresholds) -> pd.DataFrame:
    """Heads of each family (columns, ``FAMILIES`` and ``NO_FAMILY``) in each of ``draws`` bootstrap resamples
    (rows) of the matrices behind a ``run_with_cache`` cache of every layer's ``probs`` (masks ``observed``,
    (N, m, n)), each resample classified as a whole batch is (``classify_heads`` with ``thresholds``, against its
    own masks' baselines): how far a head count rests on which matrices were drawn."""
    draws = checks.count(draws, "draws")
    layers = sorted(int(name.split(".")[1]) for name in cache if name.startswith("probs."))
    masses = [matrix_masses(cache[f"probs.{i}"], observed) for i in layers]
    index = pd.MultiIndex.from_product([layers, range(masses[0][0].shape[1])], names=["layer", "head"])
    rows = []
    for _ in range(draws):
        pick = torch.randint(observed.shape[0], (observed.shape[0],), generator=generator)
        scores = torch.cat([sums[pick].sum(0) / counts[pick].sum(0) for sums, counts in masses])  # (L·H, scores)
        table = classify_heads(pd.DataFrame(scores.numpy(), columns=list(SCORES), index=index),
                               score_baselines(observed[pick]), **thresholds)
        rows.append(family_counts({"draw": table})["draw"])
    return pd.DataFrame(rows).reset_index(drop=True)


def classify_model(model: MatrixBert, batch: Batch, **thresholds) -> pd.DataFrame:
    """``classify_heads`` of ``model`` 's head scores on ``batch`` against the uniform baselines of its
    masks (``thresholds``: those of ``classify_heads``): the taxonomy table of one checkpoint, one row per
    (layer, head)."""
    return classify_heads(head_scores(model, batch), score_baselines(batch.observed), **thresholds)


def family_text(families: frozenset[str]) -> str:
    """A head's families as shown ("row, masked-row", in ``FAMILIES`` order; ``NO_FAMILY`` for none): display only."""
    return ", ".join(f for f in FAMILIES if f in families) or NO_FAMILY


def shown(table: pd.DataFrame, columns) -> pd.DataFrame:
    """``table`` 's ``columns`` (a ``classify_heads`` table) as a reader sees them: its families as text."""
    columns = list(columns)
    return table[columns].assign(**({"families": table.families.map(family_text)} if "families" in columns else {}))


def with_baselines(table: pd.DataFrame, observed: torch.Tensor, columns) -> pd.DataFrame:
    """``shown`` ``columns`` of ``table`` (a ``classify_heads`` table) and a last row ("uniform", "") of uniform
    attention's scores on the masks ``observed``: every score beside the level it must beat."""
    baselines = pd.DataFrame([score_baselines(observed)], index=pd.MultiIndex.from_tuples([("uniform", "")]))
    columns = list(columns)
    both = pd.concat([shown(table, columns), baselines[[c for c in columns if c in baselines]]])
    labels = [c for c in columns if c not in baselines]  # the family and the like: empty, not "nan"
    return both.fillna(dict.fromkeys(labels, ""))


def strongest(scores: pd.DataFrame, names=("row", "column", "self")) -> pd.DataFrame:
    """The highest value of each score in ``names`` over all heads, per step (rows) and score
    (columns), from the tidy table of ``scores_over_training``: how strong the best row, column or
    identity head is at each checkpoint."""
    chosen = scores[scores.score.isin(list(names))]
    return chosen.groupby(["step", "score"]).value.max().unstack()


def heads_by_family(table: pd.DataFrame) -> dict[str, list[tuple[int, int]]]:
    """``{family: [(layer, head), ...]}`` from a ``classify_heads`` table indexed by (layer, head); a head
    of several families is in each of them, and families without heads are left out."""
    groups: dict[str, list[tuple[int, int]]] = {}
    for key, held in table.families.items():
        for family in held or {NO_FAMILY}:
            groups.setdefault(family, []).append((int(key[0]), int(key[1])))
    return {f: groups[f] for f in FAMILIES + (NO_FAMILY,) if f in groups}


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


def separating_mask(n_rows: int = 7, n_cols: int = 7) -> torch.Tensor:
    """A structured mask (m, n) on which the masked-row and longest-contiguous-column families can be told
    apart (m, n >= 5), which ``fig5_mask`` cannot: its longest column runs through a masked row's kept
    entry at every size, so one head attending there meets both families.

    Rows 0 and m-1 are missing except one entry each (columns 1 and n-2), as in Fig. 5; rows p and
    m-1-p (p = (m-1)//2 - 1) each miss the columns on one side of the middle column c = n//2, so that
    every column but c is cut, and c, which holds no masked row's kept entry, has the longest run
    (m - 2 rows). Rows p and m-1-p keep at least two entries each, so they are not masked rows.

    >>> mask = separating_mask(7, 7)
    >>> longest_column_margin(mask)
    {'column': 3, 'run': 5, 'next run': 3, 'shared with masked rows': []}
    """
    if n_rows < 5 or n_cols < 5:
        raise ValueError(f"n_rows and n_cols must be >= 5 (two cut rows between the masked ones, and a middle "
                         f"column apart from the kept columns 1 and n_cols-2); got {n_rows} x {n_cols}")
    middle, upper = n_cols // 2, (n_rows - 1) // 2 - 1
    mask = structured_mask(n_rows, n_cols, missing_rows=(0, n_rows - 1), keep=[(0, 1), (n_rows - 1, n_cols - 2)])
    mask[upper, :middle] = False
    mask[n_rows - 1 - upper, middle + 1:] = False
    return mask


def group_ablation(model: MatrixBert, batch: Batch, groups: dict[str, Iterable[tuple[int, int]]],
                   mode: str = "uniform") -> pd.DataFrame:
    """NeurIPS App. L: L, L_obs and L_mask without and with ablation of each group of heads
    (``interventions.ablate_heads``), and the ratio with / without; one row per group.

    Both runs use the same attention path (``explicit_attention``), so an empty group has ratio exactly 1.
    """
    with attention_hooks(model, explicit_attention(model)):
        base = losses(model, batch)
    rows = {}
    for name, heads in groups.items():
        heads = list(heads)
        with ablate_heads(model, heads, mode=mode):
            ablated = losses(model, batch)
        row: dict[str, float] = {"heads": len(heads)}
        for metric in LOSSES:
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
