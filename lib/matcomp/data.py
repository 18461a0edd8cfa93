"""Samplers for the matrices and masks of the task (NeurIPS §2.1; the structured masks of Fig. 5).

Everything is drawn from an explicit ``torch.Generator`` on the generator's device, so a stream
of batches is reproducible and can be resumed from the generator's state. A mask entry is True
where the entry is *observed* (the paper's M_ij = 1); an entry is missing with probability
``p_mask`` (observed if a uniform draw exceeds ``p_mask``, as in the reference code).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from matcomp import checks
from matcomp.config import DataConfig
from matcomp.limits import fits_memory
from matcomp.tokenizer import BERT_TOKENS, DECIMALS, VALUE_MAX, VALUE_MIN


@dataclass(frozen=True)
class Batch:
    """One batch of masked matrices; B matrices of shape m × n, flattened row-major into ids.

    ids: (B, m·n) int64 token ids, MASK (0) at missing entries.
    values: (B, m, n) float32, the rounded matrices X (the regression target).
    observed: (B, m, n) bool, True where the entry is observed.
    U: (B, m, r), V: (B, n, r) the factors (None for full-rank matrices).
    """

    ids: torch.Tensor
    values: torch.Tensor
    observed: torch.Tensor
    U: torch.Tensor | None = None
    V: torch.Tensor | None = None

    def __len__(self) -> int:
        return self.values.shape[0]

    def to(self, device: torch.device | str) -> Batch:
        """This batch on ``device`` (itself where it already is)."""
        factors = [None if f is None else f.to(device) for f in (self.U, self.V)]
        return Batch(self.ids.to(device), self.values.to(device), self.observed.to(device), *factors)


def sample_factors(shape: tuple[int, ...], distribution: str, scale: float,
                   generator: torch.Generator) -> torch.Tensor:
    """I.i.d. factor entries: uniform[-scale, scale], N(0, scale²) or Laplace(0, scale)."""
    device = generator.device
    if distribution == "uniform":
        return (2 * torch.rand(shape, generator=generator, device=device) - 1) * scale
    if distribution == "gaussian":
        return torch.randn(shape, generator=generator, device=device) * scale
    if distribution == "laplace":
        # inverse CDF of the Laplace distribution, from u uniform on (-1/2, 1/2)
        u = torch.rand(shape, generator=generator, device=device) - 0.5
        return -scale * torch.sign(u) * torch.log1p(-2 * u.abs().clamp(max=0.5 - 1e-7))
    raise ValueError(f"distribution must be one of 'uniform', 'gaussian', 'laplace'; got {distribution!r}")


FACTOR_VARIANCE = {"uniform": 1 / 3, "gaussian": 1.0, "laplace": 2.0}  # at scale 1


def second_moment(cfg: DataConfig) -> float:
    """E[X_ij²] = r · Var(u)² of a low-rank entry (before clamping): the plateau level of L_mask,
    reached by a model that predicts 0 at every missing entry (r/9 for uniform[-1, 1] factors)."""
    return cfg.rank * (FACTOR_VARIANCE[cfg.distribution] * cfg.scale ** 2) ** 2


def random_mask(batch: int, n_rows: int, n_cols: int, p_mask: float,
                generator: torch.Generator) -> torch.Tensor:
    """(B, m, n) bool, each entry observed independently with probability 1 - p_mask."""
    return torch.rand(batch, n_rows, n_cols, generator=generator, device=generator.device) > p_mask


def structured_mask(n_rows: int, n_cols: int, missing_rows=(), missing_cols=(), keep=()) -> torch.Tensor:
    """(m, n) bool mask shared by a batch (NeurIPS Fig. 5): the chosen rows and columns are missing except
    the entries listed in ``keep`` as (row, col) pairs, counted from 0.

    >>> structured_mask(3, 3, missing_rows=[1], keep=[(1, 2)]).int().tolist()
    [[1, 1, 1], [0, 0, 1], [1, 1, 1]]
    """
    mask = torch.ones(n_rows, n_cols, dtype=torch.bool)
    for i in missing_rows:
        if not 0 <= i < n_rows:
            raise ValueError(f"missing_rows entry {i} must be in [0, {n_rows})")
        mask[i] = False
    for j in missing_cols:
        if not 0 <= j < n_cols:
            raise ValueError(f"missing_cols entry {j} must be in [0, {n_cols})")
        mask[:, j] = False
    for i, j in keep:
        if not (0 <= i < n_rows and 0 <= j < n_cols):
            raise ValueError(f"keep entry {(i, j)} must lie inside the {n_rows} x {n_cols} matrix")
        mask[i, j] = True
    return mask


def make_batch(values: torch.Tensor, observed: torch.Tensor, clamp: bool = False,
               U: torch.Tensor | None = None, V: torch.Tensor | None = None) -> Batch:
    """A ``Batch`` from raw matrices (B, m, n): rounds (and optionally clamps) them and tokenizes."""
    if clamp:
        values = values.clamp(VALUE_MIN, VALUE_MAX)
    values = torch.round(values, decimals=DECIMALS)
    observed = observed.expand_as(values)
    ids = BERT_TOKENS.encode_masked(values, observed, clamp=clamp).flatten(1)
    return Batch(ids=ids, values=values, observed=observed, U=U, V=V)


BYTES_PER_ENTRY = 40  # what sampling holds at once per matrix entry: values, their rounding, the mask and the ids
BYTES_PER_FACTOR = 4  # and per factor entry (float32 U and V)


def data_config(value, name: str) -> DataConfig:
    """``value``, refused by ``name`` unless it is a ``DataConfig``."""
    if not isinstance(value, DataConfig):
        raise TypeError(f"{name} must be a DataConfig (a run's config.data); got {type(value).__name__}")
    return value


def matrix_count(cfg: DataConfig, samples, name: str) -> int:
    """``samples`` as a count of ``cfg``'s matrices, refused by ``name`` unless it is an integer >= 1 whose
    batch (``sample_batch``) fits ``limits.memory_limit()``: an allocation beyond the machine would fail with
    a RuntimeError after the work has begun."""
    samples = checks.count(samples, name)
    m, n, r = cfg.n_rows, cfg.n_cols, cfg.rank
    fits_memory(samples * (BYTES_PER_ENTRY * m * n + BYTES_PER_FACTOR * (m + n) * r), name, samples)
    return samples


def sample_batch(cfg: DataConfig, batch: int, generator: torch.Generator,
                 mask: torch.Tensor | None = None, full_rank: bool = False) -> Batch:
    """B low-rank matrices X = U Vᵀ (or i.i.d. full-rank ones) with masks, on the generator's device.

    ``mask`` (m, n), if given, is shared by the whole batch; otherwise each matrix gets a random
    mask with ``cfg.p_mask``. Full-rank matrices have i.i.d. entries from the factor distribution.
    """
    cfg = data_config(cfg, "sample_batch: cfg")
    batch = matrix_count(cfg, batch, "sample_batch: batch")
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"sample_batch: generator must be a torch.Generator (matcomp.seeding); got "
                        f"{type(generator).__name__}")
    m, n, r = cfg.n_rows, cfg.n_cols, cfg.rank
    if full_rank:
        U = V = None
        values = sample_factors((batch, m, n), cfg.distribution, cfg.scale, generator)
    else:
        U = sample_factors((batch, m, r), cfg.distribution, cfg.scale, generator)
        V = sample_factors((batch, n, r), cfg.distribution, cfg.scale, generator)
        values = U @ V.transpose(1, 2)  # (B, m, n)
    if mask is None:
        observed = random_mask(batch, m, n, cfg.p_mask, generator)
    else:
        checks.tensor(mask, "sample_batch: mask", "mask", shape=(m, n))
        observed = mask.to(device=generator.device, dtype=torch.bool)
    return make_batch(values, observed, clamp=cfg.clamp, U=U, V=V)
