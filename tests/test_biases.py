"""The plateau-shortening changes: grid position initialisation and the decaying attention bias."""

import torch

from matcomp.config import ModelConfig
from matcomp.models.factory import build_model
from matcomp.models.hooks import HOOKED
from matcomp.models.recipe import attention_bias, grid_positions, same_row_or_column
from matcomp.runs.store import get_or_train


def test_grid_positions_are_a_row_part_plus_a_column_part():
    model = build_model(ModelConfig(hidden=16, layers=1, heads=2), seed=0)
    before = model.bert.embeddings.position_embeddings.weight.detach().clone()
    grid_positions(model, 3, 4, seed=0)
    p = model.bert.embeddings.position_embeddings.weight.detach()
    grid = p[:12].reshape(3, 4, 16)
    interaction = grid - grid.mean(0, keepdim=True) - grid.mean(1, keepdim=True) + grid.mean((0, 1), keepdim=True)
    assert interaction.abs().max() < 1e-6  # additive in row and column: no interaction term
    plain = before[:12].reshape(3, 4, 16)
    assert (plain - plain.mean(0, keepdim=True) - plain.mean(1, keepdim=True)).abs().max() > 1e-2
    assert torch.equal(p[12:], before[12:])  # positions beyond the matrix are untouched
    assert 0.015 < p[:12].std() < 0.025  # BERT's scale (0.02)


def test_a_strong_bias_confines_one_layer_to_the_row_and_column():
    model = build_model(ModelConfig(hidden=16, layers=1, heads=2), seed=0)
    ids = torch.randint(1, 200, (2, 16), generator=torch.Generator().manual_seed(0))
    changed = ids.clone()
    changed[:, 15] = (changed[:, 15] + 50) % 200 + 1  # the entry at (3, 3)
    plain = model(ids)
    with attention_bias(model, 1e4 * (same_row_or_column(4, 4) - 1)):  # -1e4 outside row and column
        assert model.attention == HOOKED
        a, b = model(ids), model(changed)
    assert (a[:, 0] - b[:, 0]).abs().max() < 1e-7  # (0, 0) does not see (3, 3)
    assert (a[:, 3] - b[:, 3]).abs().max() > 1e-4  # (0, 3) shares its column
    assert model.attention == "sdpa" and torch.allclose(model(ids), plain, atol=1e-6)  # gone after the block


def test_training_with_a_bias_ends_on_plain_attention(micro, store):
    cfg = micro.override({"train.attention_bias": 3.0, "train.attention_bias_steps": 20,
                          "train.position_init": "grid"})
    run, plain = get_or_train(cfg, progress=False), get_or_train(micro, progress=False)
    assert run.path != plain.path
    start = run.checkpoint(0).bert.embeddings.position_embeddings.weight.detach()[:9].reshape(3, 3, -1)
    assert (start - start.mean(0) - start.mean(1, keepdim=True) + start.mean((0, 1))).abs().max() < 1e-6
    assert run.checkpoint(40).attention == "sdpa"
    assert abs(run.metrics.L.iloc[0] - plain.metrics.L.iloc[0]) > 1e-4  # step 1 ran with the bias
