import pytest
import torch

from matcomp.analysis.interventions import ablate_heads, heads_by_layer, transplant
from matcomp.config import DataConfig, ModelConfig
from matcomp.data import sample_batch
from matcomp.models.factory import build_model
from matcomp.models.hooks import LayerHooks, attention_hooks, run_with_cache, stacked

CFG = ModelConfig(hidden=32, layers=2, heads=4)


@pytest.fixture
def model():
    return build_model(CFG, seed=0).eval()


@pytest.fixture
def ids():
    return sample_batch(DataConfig(n_rows=4, n_cols=4, rank=1), 6, torch.Generator().manual_seed(0)).ids


def state(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


@torch.no_grad()
def test_identity_edit_changes_nothing_and_the_model_is_restored(model, ids):
    before, weights = model(ids), state(model)
    same = {0: LayerHooks(edit=lambda p: p), 1: LayerHooks(edit=lambda p: p)}
    with attention_hooks(model, same):
        inside, cache = run_with_cache(model, ids, ["probs"])
    assert torch.allclose(inside, before, atol=1e-5)  # eager inside vs sdpa outside
    assert model.attention == "sdpa"
    assert all(torch.equal(v, weights[k]) for k, v in model.state_dict().items())
    assert not any(hasattr(layer.attention.self, "_matcomp_edit") for layer in model.bert.encoder.layer)
    assert torch.equal(model(ids), before)
    maps = cache["probs.0"]
    assert maps.shape == (6, 4, 16, 16)
    assert torch.allclose(maps.sum(-1), torch.ones(6, 4, 16))
    assert stacked(cache, "probs").shape == (2, 6, 4, 16, 16)


@torch.no_grad()
def test_uniform_ablation_sets_chosen_heads_to_one_over_s_only(model, ids):
    for layer in model.bert.encoder.layer:  # at init attention is nearly uniform already: sharpen it
        layer.attention.self.query.weight.mul_(30)
    _, clean = run_with_cache(model, ids, ["probs"])
    with ablate_heads(model, [(1, 2)]):
        out, ablated = run_with_cache(model, ids, ["probs"])
    maps = ablated["probs.1"]
    assert torch.allclose(maps[:, 2], torch.full((6, 16, 16), 1 / 16))
    assert torch.allclose(maps[:, [0, 1, 3]], clean["probs.1"][:, [0, 1, 3]])
    assert torch.allclose(ablated["probs.0"], clean["probs.0"])
    assert (out - model(ids)).abs().max() > 1e-4  # eager and sdpa agree to ~1e-7


@torch.no_grad()
def test_batch_mean_ablation_gives_every_matrix_the_mean_pattern(model, ids):
    _, clean = run_with_cache(model, ids, ["probs"])
    with ablate_heads(model, mode="batch_mean"):
        _, ablated = run_with_cache(model, ids, ["probs"])
    mean = clean["probs.0"].mean(0)
    assert torch.allclose(ablated["probs.0"][3], mean, atol=1e-6)


def test_bad_heads_and_modes_are_named(model):
    with pytest.raises(ValueError, match=r"head \(2, 0\) must have layer in \[0, 2\)"):
        heads_by_layer(model, [(2, 0)])
    with pytest.raises(ValueError, match="mode must be one of"):
        ablate_heads(model, mode="zero")
    with pytest.raises(ValueError, match="hooked layer 5"):
        with attention_hooks(model, {5: LayerHooks(edit=lambda p: p)}):
            pass


@torch.no_grad()
def test_model_is_restored_after_an_error_inside_the_block(model, ids):
    before = model(ids)
    with pytest.raises(RuntimeError):
        with ablate_heads(model):
            raise RuntimeError("boom")
    assert model.attention == "sdpa" and torch.equal(model(ids), before)


@torch.no_grad()
def test_transplant_copies_only_qkv_and_leaves_both_models_alone(model, ids):
    donor = build_model(CFG, seed=1).eval()
    model_before, donor_before = state(model), state(donor)
    switched = transplant(model, donor)
    sd = switched.state_dict()
    for name, value in sd.items():
        source = donor_before if ".attention.self." in name else model_before
        assert torch.equal(value, source[name]), name
    assert all(torch.equal(v, model_before[k]) for k, v in model.state_dict().items())
    assert torch.equal(transplant(model, model)(ids), model(ids))  # self-transplant: identity
    with pytest.raises(ValueError, match="matches no parameter"):
        transplant(model, donor, pattern="nothing")
    with pytest.raises(ValueError, match="differ in shape"):
        transplant(model, build_model(ModelConfig(hidden=16, layers=2, heads=4), seed=0))


def test_attention_interventions_lists_the_four_conditions(model):
    from matcomp.analysis.evaluation import losses
    from matcomp.analysis.interventions import attention_interventions

    batch = sample_batch(DataConfig(n_rows=4, n_cols=4, rank=1), 6, torch.Generator().manual_seed(0))
    donor = build_model(CFG, seed=1).eval()
    table = attention_interventions(model, donor, batch, "donor")
    assert list(table.index) == ["no intervention", "all heads uniform", "all heads batch-mean", "Q, K, V from donor"]
    assert list(table.columns) == ["L_obs", "L_mask"]
    assert table.loc["no intervention", "L_mask"] == pytest.approx(losses(model, batch)["L_mask"])
    with ablate_heads(model, mode="uniform"):
        uniform = losses(model, batch)
    assert table.loc["all heads uniform", "L_obs"] == pytest.approx(uniform["L_obs"])
    assert table.loc["Q, K, V from donor", "L_mask"] == pytest.approx(losses(transplant(model, donor), batch)["L_mask"])
    assert table.loc["all heads uniform", "L_mask"] != table.loc["no intervention", "L_mask"]


@torch.no_grad()
def test_one_cache_holds_every_hook_point_of_one_pass(model, ids):
    out, cache = run_with_cache(model, ids)
    assert torch.allclose(out, model(ids), atol=1e-5)  # the explicit softmax beside the fused one
    assert sorted(cache) == sorted([f"{p}.{layer}" for p in ("probs", "z") for layer in (0, 1)]
                                   + [f"resid.{layer}" for layer in (0, 1, 2)])
    assert cache["probs.1"].shape == (6, 4, 16, 16) and cache["z.1"].shape == (6, 16, 4, 8)
    assert torch.equal(model.readout(cache["resid.2"]).squeeze(-1), out)  # the stream and the answer: one pass
    assert torch.allclose(cache["resid.2"], model.predict_with_states(ids)[1][-1], atol=1e-5)
    projected = model.bert.encoder.layer[0].attention.output.dense(cache["z.0"].flatten(2))
    assert projected.shape == (6, 16, 32)  # z is what the output projection reads
    with pytest.raises(ValueError, match="hook points must be among"):
        run_with_cache(model, ids, ["mlp"])
    with pytest.raises(ValueError, match="no 'z' in the cache"):
        stacked(run_with_cache(model, ids, ["probs"])[1], "z")
