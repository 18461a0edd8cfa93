import pandas as pd
import pytest
import torch

from matcomp.analysis.evaluation import copy_check, losses
from matcomp.config import DataConfig, ModelConfig
from matcomp.data import sample_batch
from matcomp.models.factory import build_model
from matcomp.seeding import analysis_generator
from matcomp.tokenizer import Tokenizer

DATA = DataConfig(n_rows=4, n_cols=4, rank=1, p_mask=0.3)


class Copier(torch.nn.Module):
    """A perfect copying model: outputs the value of each token, 0 for MASK."""

    def __init__(self):
        super().__init__()
        self.cfg = ModelConfig(hidden=8, layers=1, heads=1)
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def forward(self, ids, position_ids=None):
        return Tokenizer().decode(ids)


def test_a_copying_model_scores_zero_in_every_cell_of_the_copy_check():
    table = copy_check(Copier(), DATA, samples=64)
    assert list(table.columns) == ["inputs", "m", "L'_mask", "L_obs"]
    assert set(table.inputs) == {"rank-1", "random"} and list(table.m[:3]) == ["MASK", "0.44", "-0.24"]
    assert table[["L'_mask", "L_obs"]].abs().max().max() < 1e-10


def test_a_copying_model_has_l_mask_at_the_second_moment():
    batch = sample_batch(DATA, 4096, analysis_generator(0))
    result = losses(Copier(), batch)
    assert result["L_obs"] < 1e-10 and result["mask_value"] == 0
    assert result["L_mask"] == pytest.approx(1 / 9, rel=0.05)  # r/9 for rank 1


def test_a_model_predicting_a_constant_is_off_by_that_constant_at_replaced_entries():
    class Constant(Copier):
        def forward(self, ids, position_ids=None):
            return torch.full(ids.shape, 0.44)

    table = copy_check(Constant(), DATA, samples=32).set_index(["inputs", "m"])
    assert table.loc[("random", "0.44"), "L'_mask"] == pytest.approx(0.0, abs=1e-10)
    assert table.loc[("random", "MASK"), "L'_mask"] == pytest.approx(0.44 ** 2, rel=1e-5)
    assert table.loc[("random", "-0.24"), "L'_mask"] == pytest.approx(0.68 ** 2, rel=1e-5)


def test_losses_of_a_real_model_match_a_manual_computation():
    model = build_model(ModelConfig(hidden=16, layers=1, heads=2), seed=0).eval()
    batch = sample_batch(DATA, 8, analysis_generator(1))
    with torch.no_grad():
        pred = model(batch.ids).reshape(8, 4, 4)
    err = (pred - batch.values) ** 2
    result = losses(model, batch)
    assert result["L_mask"] == pytest.approx(err[~batch.observed].mean().item(), rel=1e-5)
    assert result["L"] == pytest.approx(err.mean().item(), rel=1e-5)
    assert isinstance(copy_check(model, DATA, samples=8), pd.DataFrame)


def test_second_moments_are_r_over_9_and_the_sample_agrees():
    from matcomp.analysis.evaluation import second_moments

    table = second_moments([DATA, DataConfig(n_rows=3, n_cols=5, rank=2)], samples=4000)
    assert list(table.index) == ["4x4 rank 1", "3x5 rank 2"]
    assert table["r/9"].tolist() == pytest.approx([1 / 9, 2 / 9])
    assert (table["relative difference"].abs() < 0.03).all()
    assert (table["max |X_ij|"] <= table["r/9"] * 9).all()  # |X_ij| <= r for uniform[-1, 1] factors
    assert table["relative difference"].iloc[0] == pytest.approx(table["mean X_ij^2 (sampled)"].iloc[0] * 9 - 1)
