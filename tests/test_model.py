import pytest
import torch

from matcomp.config import DataConfig, ModelConfig
from matcomp.data import sample_batch
from matcomp.metrics import masked_mse
from matcomp.models.factory import build_model, count_parameters, trainable_parameters
from matcomp.presets import preset_config


def test_shapes_and_seeded_init():
    cfg = ModelConfig(hidden=32, layers=2, heads=4)
    model = build_model(cfg, seed=0)
    ids = sample_batch(DataConfig(), 5, torch.Generator().manual_seed(0)).ids
    assert model(ids).shape == (5, 49)
    same = build_model(cfg, seed=0)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), same.state_dict().values()))
    assert not torch.equal(model.readout.weight, build_model(cfg, seed=1).readout.weight)


def test_paper_model_size():
    # the paper's 4-layer model (NeurIPS App. D) has ~30.29 M parameters
    model = build_model(preset_config("paper").model, seed=0)
    assert round(count_parameters(model) / 1e6, 2) in (30.29, 30.28, 30.30)
    layer = model.bert.encoder.layer[0]
    assert abs(layer.attention.self.query.weight.std().item() - 0.02) < 1e-3  # BERT init


def test_mask_row_stays_zero_and_token_type_is_inert():
    cfg = ModelConfig(hidden=32, layers=2, heads=4)
    model = build_model(cfg, seed=0)
    emb = model.bert.embeddings
    assert emb.word_embeddings.weight[0].abs().sum() == 0
    assert emb.token_type_embeddings.weight.abs().sum() == 0 and not emb.token_type_embeddings.weight.requires_grad
    opt = torch.optim.Adam(trainable_parameters(model), lr=1e-2)
    gen = torch.Generator().manual_seed(0)
    before = emb.word_embeddings.weight.detach().clone()
    for _ in range(5):
        b = sample_batch(DataConfig(), 16, gen)
        loss = masked_mse(model(b.ids), b.values, b.observed)["L"]
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert emb.word_embeddings.weight[0].abs().sum() == 0          # MASK row: exactly zero
    assert not torch.equal(emb.word_embeddings.weight[1:], before[1:])  # the others did train
    assert emb.token_type_embeddings.weight.abs().sum() == 0


def test_sdpa_and_eager_agree_on_the_same_weights():
    model = build_model(ModelConfig(hidden=32, layers=2, heads=4), seed=0).eval()
    ids = sample_batch(DataConfig(), 8, torch.Generator().manual_seed(0)).ids
    with torch.no_grad():
        fast = model.set_attention("sdpa")(ids)
        slow = model.set_attention("eager")(ids)
    assert model.attention == "eager"
    assert torch.allclose(fast, slow, atol=1e-5)


def test_unknown_attention_is_an_error():
    with pytest.raises(ValueError, match="attention implementation"):
        build_model(ModelConfig(hidden=32, layers=1, heads=4), seed=0).set_attention("magic")


def test_a_registered_attention_function_sees_every_layer_and_changes_nothing():
    from transformers import AttentionInterface
    from transformers.models.bert.modeling_bert import eager_attention_forward

    seen = []

    def recording(module, query, key, value, attention_mask, **kwargs):
        out, probs = eager_attention_forward(module, query, key, value, attention_mask, **kwargs)
        seen.append(probs.shape)
        return out, probs

    AttentionInterface.register("matcomp_test_recording", recording)
    model = build_model(ModelConfig(hidden=32, layers=3, heads=4), seed=0).eval()
    ids = sample_batch(DataConfig(), 2, torch.Generator().manual_seed(0)).ids
    with torch.no_grad():
        plain = model(ids)
        recorded = model.set_attention("matcomp_test_recording")(ids)
    assert seen == [(2, 4, 49, 49)] * 3
    assert torch.allclose(plain, recorded, atol=1e-5)
