import pytest
import torch

from matcomp.analysis.evaluation import losses, predict
from matcomp.analysis.patching import (
    all_layers,
    last_layer,
    negation_patching,
    patch_heads,
    patched_heads,
    per_head,
    per_layer,
)
from matcomp.analysis.positions import permuted_losses, position_permutation
from matcomp.config import DataConfig, ModelConfig
from matcomp.data import sample_batch
from matcomp.models.factory import build_model
from matcomp.models.hooks import run_with_cache, stacked
from matcomp.tokenizer import Tokenizer

CFG = ModelConfig(hidden=32, layers=2, heads=4)
DATA = DataConfig(n_rows=4, n_cols=4, rank=1)


@pytest.fixture
def model():
    model = build_model(CFG, seed=0).eval()
    with torch.no_grad():  # at init attention is nearly uniform: sharpen it so that heads differ
        for layer in model.bert.encoder.layer:
            layer.attention.self.query.weight.mul_(30)
    return model


@pytest.fixture
def batch():
    return sample_batch(DATA, 6, torch.Generator().manual_seed(0))


def z_cache(model, ids):
    """Every head's output z (L, B, S, H, d), from the activation cache."""
    return stacked(run_with_cache(model, ids, ["z"])[1], "z")


def hooks(model):
    return [dict(layer.attention.self._forward_hooks) for layer in model.bert.encoder.layer]


def test_cached_z_is_the_input_of_the_output_projection(model, batch):
    seen = []
    handle = model.bert.encoder.layer[1].attention.output.dense.register_forward_pre_hook(
        lambda module, args: seen.append(args[0]))
    z = z_cache(model, batch.ids)
    handle.remove()
    assert z.shape == (2, 6, 16, 4, 8)  # (L, B, S, H, d)
    assert torch.equal(z[1].flatten(2), seen[0])


def test_patching_a_run_with_its_own_cache_changes_nothing(model, batch):
    before, hooks_before = predict(model, batch.ids), hooks(model)
    out = patch_heads(model, batch.ids, batch.ids, all_layers(2, 4) | per_head(2, 4))
    assert all(torch.allclose(pred, before, atol=1e-6) for pred in out.values())
    assert hooks(model) == hooks_before and torch.equal(predict(model, batch.ids), before)


def test_patching_no_heads_is_the_corrupted_run_and_every_head_restores_clean_z(model, batch):
    corrupt = Tokenizer().negate(batch.ids)
    none = {"none": torch.zeros(2, 4, dtype=torch.bool)}
    out = patch_heads(model, batch.ids, corrupt, none | all_layers(2, 4) | last_layer(2, 4))
    assert torch.equal(out["none"], predict(model, corrupt))
    clean = z_cache(model, batch.ids)
    with patched_heads(model, clean, all_layers(2, 4)["all layers"]):
        z = z_cache(model, corrupt)  # hooks added later see the patched output
    assert torch.equal(z, clean)
    # a missing entry's input (MASK + position) is the same in both runs and attention is the only
    # path between positions, so patching every head restores the missing entries exactly; observed
    # entries keep -X in their residual stream
    clean_pred, patched = predict(model, batch.ids).reshape(6, 4, 4), out["all layers"].reshape(6, 4, 4)
    missing = ~batch.observed
    assert torch.allclose(patched[missing], clean_pred[missing], atol=1e-6)
    assert (patched[~missing] - clean_pred[~missing]).abs().max() > 1e-3
    assert not torch.allclose(out["all layers"], out["last layer"])


def test_hooks_are_removed_after_an_error(model, batch):
    before, hooks_before = predict(model, batch.ids), hooks(model)
    with pytest.raises(RuntimeError):
        with patched_heads(model, z_cache(model, batch.ids), all_layers(2, 4)["all layers"]):
            raise RuntimeError("boom")
    assert hooks(model) == hooks_before and torch.equal(predict(model, batch.ids), before)


def test_bad_sites_name_the_expected_shape(model, batch):
    with pytest.raises(ValueError, match=r"site 'x' must be a bool mask of shape \(layers, heads\) = \(2, 4\); "
                                         r"got \(4, 2\)"):
        patch_heads(model, batch.ids, batch.ids, {"x": torch.ones(4, 2, dtype=torch.bool)})
    with pytest.raises(ValueError, match="bool mask"):
        patch_heads(model, batch.ids, batch.ids, {"x": torch.ones(2, 4)})
    with pytest.raises(ValueError, match="corrupt_ids must have the shape"):
        patch_heads(model, batch.ids, batch.ids[:2], all_layers(2, 4))


def test_site_builders_and_the_table(model, batch):
    assert per_layer(2, 4)["layer 1"].sum() == 4 and last_layer(2, 4)["last layer"][1].all()
    sites = per_head(2, 4)
    assert len(sites) == 8 and sites[(1, 2)].nonzero().tolist() == [[1, 2]]
    table = negation_patching(model, batch, all_layers(2, 4) | last_layer(2, 4))
    assert list(table.index) == ["clean", "corrupted", "all layers", "last layer"]
    assert list(table.columns) == ["L_mask(X)", "L_mask(-X)", "L_obs(X)", "L_obs(-X)"]
    corrupted = predict(model, Tokenizer().negate(batch.ids)).reshape(6, 4, 4)
    missing = ~batch.observed
    assert table.loc["corrupted", "L_mask(-X)"] == pytest.approx(
        ((corrupted + batch.values)[missing] ** 2).mean().item())
    assert table.loc["clean", "L_obs(X)"] == pytest.approx(losses(model, batch)["L_obs"])
    heatmap = negation_patching(model, batch, per_head(2, 4), references=False)["L_mask(X)"].unstack()
    assert heatmap.shape == (2, 4)
    with pytest.raises(ValueError, match="layers and heads must be >= 1"):
        all_layers(0, 4)


def test_identity_permutation_changes_nothing_and_a_permutation_changes_the_output(model, batch):
    S = batch.ids.shape[1]
    before = predict(model, batch.ids)
    assert torch.equal(predict(model, batch.ids, torch.arange(S)[None]), before)
    perm = position_permutation(S, seed=0)
    assert torch.equal(perm, position_permutation(S, seed=0)) and sorted(perm.tolist()) == list(range(S))
    assert (predict(model, batch.ids, perm[None]) - before).abs().max() > 1e-3
    table = permuted_losses(model, batch, seeds=[0, 1, 2])
    assert list(table.columns) == ["unpermuted", "mean", "std", "min", "max"]
    assert table.loc["L", "min"] <= table.loc["L", "mean"] <= table.loc["L", "max"]
    with pytest.raises(ValueError, match="n must be an integer >= 1"):
        position_permutation(0, seed=0)
    with pytest.raises(ValueError, match="seeds must hold"):
        permuted_losses(model, batch, seeds=[])


def test_restored_fraction_scales_each_site_between_corrupted_and_clean():
    import pandas as pd

    from matcomp.analysis.patching import restored_fraction

    table = pd.DataFrame({"L_mask(X)": [0.02, 0.42, 0.02, 0.22, 0.5]},
                         index=["clean", "corrupted", "all layers", "layer 0", "layer 1"])
    restored = restored_fraction(table)
    assert list(restored.index) == ["all layers", "layer 0", "layer 1"]
    assert restored.tolist() == pytest.approx([1.0, 0.5, -0.2])  # a site can do worse than the corrupted run
    flat = table.assign(**{"L_mask(X)": [0.11, 0.115, 0.11, 0.11, 0.11]})  # a model that answers ~0
    assert restored_fraction(flat) is None and restored_fraction(flat, min_gap=0.01) is not None


def test_restored_fraction_of_patching_every_head_is_one(model, batch):
    from matcomp.analysis.patching import restored_fraction

    table = negation_patching(model, batch, all_layers(2, 4))
    assert restored_fraction(table, min_gap=0)["all layers"] == pytest.approx(1.0, abs=1e-5)


def test_the_closing_values_name_the_layer_that_restores_most_and_where_the_observed_entries_sit():
    import pandas as pd

    from matcomp.analysis.patching import restored_fraction
    from matcomp.book.chapters.attention_patching import patching_values

    sites = ["clean", "corrupted", "all layers", "last layer", "layer 0", "layer 1", "layer 2", "layer 3"]
    layers = pd.DataFrame({"L_mask(X)": [0.02, 0.82, 0.02, 0.62, 0.80, 0.50, 0.70, 0.62],
                           "L_mask(-X)": [0.8, 0.0, 0.8, 0.1, 0.0, 0.3, 0.1, 0.1],
                           "L_obs(X)": [0.0, 0.4, 0.4, 0.39, 0.4, 0.4, 0.4, 0.39],
                           "L_obs(-X)": [0.4, 0.0, 0.004, 0.0001, 0.0, 0.0, 0.0, 0.0001]}, index=sites)
    values = patching_values(layers, restored_fraction(layers), n_layers=4)
    assert values["pa_restored"].data == "Layer 1 alone restores 0.40 of the clean answer, the last layer alone 0.25."
    assert (values["pa_obs_all_x"], values["pa_obs_all_neg"], values["pa_obs_nearer"]) == ("0.4", "0.004", "−X")
    assert (values["pa_last_x"], values["pa_last_neg"], values["pa_clean"]) == ("0.62", "0.1", "0.02")
    last_best = layers.assign(**{"L_mask(X)": [0.02, 0.82, 0.02, 0.22, 0.80, 0.50, 0.70, 0.22]})
    assert patching_values(last_best, restored_fraction(last_best), 4)["pa_restored"].data == (
        "The last layer (layer 3) alone restores 0.75 of the clean answer, more than any other single layer.")
    assert "nothing to restore" in patching_values(layers, None, 4)["pa_restored"].data
