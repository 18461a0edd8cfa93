import math

import pytest
import torch

from matcomp.config import DataConfig
from matcomp.data import sample_batch, second_moment, structured_mask
from matcomp.tokenizer import Tokenizer


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def test_low_rank_matrices_have_the_requested_rank():
    for rank in (1, 2, 3):
        b = sample_batch(DataConfig(rank=rank), 64, gen())
        exact = b.U @ b.V.transpose(1, 2)
        assert (torch.linalg.matrix_rank(exact) == rank).all()
        assert torch.allclose(b.values, exact, atol=0.005 + 1e-6)  # rounding to 2 decimals only
        assert torch.equal(b.values, torch.round(b.values, decimals=2))


def test_mask_rate_matches_p_mask():
    for p in (0.1, 0.3, 0.6):
        b = sample_batch(DataConfig(p_mask=p), 4096, gen())
        missing = (~b.observed).float().mean().item()
        stderr = math.sqrt(p * (1 - p) / b.observed.numel())
        assert abs(missing - p) < 5 * stderr


def test_second_moment_is_rank_over_nine():
    # E[X_ij^2] = r * E[u^2] * E[v^2] = r / 9 for uniform[-1, 1] factors: the plateau level.
    assert second_moment(DataConfig(rank=2)) == pytest.approx(2 / 9)
    cases = [DataConfig(rank=1), DataConfig(rank=2), DataConfig(rank=2, scale=1.5),
             DataConfig(rank=1, distribution="gaussian", clamp=True),
             DataConfig(rank=1, distribution="laplace", scale=0.5, clamp=True)]
    for i, cfg in enumerate(cases):
        b = sample_batch(cfg, 20000, gen(i))
        x2 = b.values.pow(2)
        mean, stderr = x2.mean().item(), x2.mean(dim=(1, 2)).std().item() / math.sqrt(len(b))
        assert abs(mean - second_moment(cfg)) < 4 * stderr, (cfg, mean, second_moment(cfg), stderr)


def test_ids_encode_values_and_mask():
    b = sample_batch(DataConfig(), 32, gen())
    assert b.ids.shape == (32, 49)
    flat_obs = b.observed.flatten(1)
    assert (b.ids[~flat_obs] == 0).all()
    assert torch.allclose(Tokenizer().decode(b.ids)[flat_obs], b.values.flatten(1)[flat_obs])


def test_same_generator_state_gives_the_same_batch():
    a, b = sample_batch(DataConfig(), 8, gen(3)), sample_batch(DataConfig(), 8, gen(3))
    assert torch.equal(a.ids, b.ids) and torch.equal(a.values, b.values)
    assert not torch.equal(a.ids, sample_batch(DataConfig(), 8, gen(4)).ids)


def test_structured_mask_is_shared_by_the_batch():
    mask = structured_mask(7, 7, missing_rows=[3, 6], keep=[(3, 1), (6, 5)])
    assert mask.sum().item() == 49 - 14 + 2
    assert mask[3].tolist() == [False, True, False, False, False, False, False]
    b = sample_batch(DataConfig(), 16, gen(), mask=mask)
    assert (b.observed == mask).all()
    assert structured_mask(3, 3, missing_cols=[0]).int().tolist() == [[0, 1, 1]] * 3
    with pytest.raises(ValueError, match="missing_rows"):
        structured_mask(7, 7, missing_rows=[7])
    with pytest.raises(ValueError, match="shape"):
        sample_batch(DataConfig(), 4, gen(), mask=torch.ones(5, 5, dtype=torch.bool))


def test_full_rank_matrices():
    b = sample_batch(DataConfig(), 64, gen(), full_rank=True)
    assert b.U is None
    assert (torch.linalg.matrix_rank(b.values) == 7).float().mean() > 0.95
    assert b.values.abs().max() <= 1


def test_gaussian_and_laplace_factors():
    for dist in ("gaussian", "laplace"):
        cfg = DataConfig(distribution=dist, rank=1, clamp=True)
        u = sample_batch(cfg, 20000, gen()).U
        # both have variance 1 (gaussian, scale 1) or 2 (laplace, scale 1)
        assert abs(u.var().item() - (1 if dist == "gaussian" else 2)) < 0.1
        assert abs(u.mean().item()) < 0.05


def test_clamped_values_stay_in_the_vocabulary():
    cfg = DataConfig(distribution="gaussian", rank=4, scale=2.0, clamp=True)
    b = sample_batch(cfg, 512, gen())
    assert b.values.abs().max() <= 10 and b.ids.max() <= 2001
