"""The plateau-shortening changes: grid position initialisation, the attention bias (faded or constant)
and the follow-up's attention scale."""

import pytest
import torch

from matcomp.config import ModelConfig, TrainConfig
from matcomp.models.factory import build_model
from matcomp.models.hooks import HOOKED
from matcomp.models.recipe import attention_targets, grid_positions, recipe_hooks
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
    constant = TrainConfig(attention_bias=1e4, attention_bias_schedule="constant")  # +1e4 on row and column
    with recipe_hooks(model, constant, step=10**6, targets=attention_targets(4, 4)):
        assert model.attention == HOOKED
        a, b = model(ids), model(changed)
    assert (a[:, 0] - b[:, 0]).abs().max() < 1e-7  # (0, 0) does not see (3, 3)
    assert (a[:, 3] - b[:, 3]).abs().max() > 1e-4  # (0, 3) shares its column
    assert model.attention == "sdpa" and torch.allclose(model(ids), plain, atol=1e-6)  # gone after the block


def test_a_vanishing_scale_hides_the_targets_and_only_them_from_its_step_on():
    model = build_model(ModelConfig(hidden=16, layers=1, heads=2), seed=0)
    ids = torch.randint(1, 200, (2, 16), generator=torch.Generator().manual_seed(0))
    in_row, elsewhere = ids.clone(), ids.clone()
    in_row[:, 3] = (in_row[:, 3] + 50) % 200 + 1  # (0, 3): a target of (0, 0)
    elsewhere[:, 15] = (elsewhere[:, 15] + 50) % 200 + 1  # (3, 3): not one
    tc = TrainConfig(attention_scale=1e-9, attention_scale_from=5, attention_diagonal=False)
    targets = attention_targets(4, 4, diagonal=False)
    assert recipe_hooks(model, tc, step=4, targets=targets) is None  # before its step, plain attention
    with recipe_hooks(model, tc, step=5, targets=targets):
        a, row, other = model(ids), model(in_row), model(elsewhere)
    assert (a[:, 0] - row[:, 0]).abs().max() < 1e-6  # scaled to nothing
    assert (a[:, 0] - other[:, 0]).abs().max() > 1e-4  # untouched


def test_recipe_fields_are_checked_by_name():
    with pytest.raises(ValueError, match="train.attention_bias_steps.*'constant'"):
        TrainConfig(attention_bias=2.0, attention_bias_steps=100, attention_bias_schedule="constant")
    with pytest.raises(ValueError, match="train.attention_bias_schedule"):
        TrainConfig(attention_bias=2.0, attention_bias_schedule="linear")
    with pytest.raises(ValueError, match="train.attention_scale"):
        TrainConfig(attention_scale=0.0)
    with pytest.raises(ValueError, match="train.attention_scale_from"):
        TrainConfig(attention_scale=2.0, attention_scale_from=0)


def test_training_with_a_bias_ends_on_plain_attention(micro, store):
    cfg = micro.override({"train.attention_bias": 3.0, "train.attention_bias_steps": 20,
                          "train.position_init": "grid"})
    run, plain = get_or_train(cfg, progress=False), get_or_train(micro, progress=False)
    assert run.path != plain.path
    start = run.checkpoint(0).bert.embeddings.position_embeddings.weight.detach()[:9].reshape(3, 3, -1)
    assert (start - start.mean(0) - start.mean(1, keepdim=True) + start.mean((0, 1))).abs().max() < 1e-6
    assert run.checkpoint(40).attention == "sdpa"
    assert abs(run.metrics.L.iloc[0] - plain.metrics.L.iloc[0]) > 1e-4  # step 1 ran with the bias


def test_training_with_a_scale_matches_plain_training_until_its_step(micro, store):
    cfg = micro.override({"train.attention_scale": 10.0, "train.attention_scale_from": 11})
    run, plain = get_or_train(cfg, progress=False), get_or_train(micro, progress=False)
    assert run.path != plain.path and micro.run_id == micro.override({"train.attention_diagonal": True}).run_id
    assert run.metrics.L.iloc[:10].tolist() == plain.metrics.L.iloc[:10].tolist()
    assert abs(run.metrics.L.iloc[10] - plain.metrics.L.iloc[10]) > 1e-5  # step 11 ran with the scale
