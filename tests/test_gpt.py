"""The autoregressive GPT of App. G: tokens, sequences, losses, greedy decoding, config checks."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from matcomp.analysis.gpt import attention_maps, attention_scores, completion_scores, copy_onset
from matcomp.config import RunConfig
from matcomp.data import make_batch, sample_batch
from matcomp.drop import detect_drop
from matcomp.models.factory import build_model
from matcomp.models.gpt import MatrixGPT, sequences
from matcomp.presets import preset_config
from matcomp.runs.store import get_or_train
from matcomp.tokenizer import GPT_TOKENS, MASK_ID


def two_by_two():
    values = torch.tensor([[[0.5, -1.0], [2.0, 0.01]]])
    observed = torch.tensor([[[True, False], [True, True]]])
    return make_batch(values, observed)


def test_sequence_is_masked_matrix_sep_full_matrix():
    seq = sequences(two_by_two())
    assert seq.tolist() == [[251, MASK_ID, 401, 202, GPT_TOKENS.sep_id, 251, 101, 401, 202]]
    with pytest.raises(ValueError, match=r"outside the vocabulary's range \[-2, 2\]"):
        GPT_TOKENS.encode(torch.tensor([2.5]))


def test_losses_and_greedy_decoding_of_a_model_that_copies():
    cfg = preset_config("smoke_gpt").model
    model = build_model(cfg, seed=0)
    assert isinstance(model, MatrixGPT) and model.gpt.lm_head.bias is None
    assert model.gpt.lm_head.weight.data_ptr() != model.gpt.transformer.wte.weight.data_ptr()  # untied
    batch = two_by_two()
    out = model.losses(batch)
    assert out["L"].requires_grad and abs(out["L"].item() - torch.log(torch.tensor(405.0)).item()) < 1.0

    # a "model" whose logits at position t point at token t - 4 (so it writes token t + 1 = t - 4 + 5,
    # the same entry of the masked input) decodes the observed entries right and MISSING at the other
    class Copier(MatrixGPT):
        def forward(self, ids):
            logits = torch.full((*ids.shape, 405), -1e4)
            back = torch.cat([torch.zeros_like(ids[:, :4]), ids[:, :-4]], dim=1)
            return logits.scatter(2, back.unsqueeze(-1), 0.0)

    copier = Copier(cfg)
    assert copier.decode(sequences(batch)[:, :5])[0].tolist() == [[251, MASK_ID, 401, 202]]
    ev = copier.eval_losses(batch)
    assert ev["acc_obs"].item() == 1.0 and ev["acc_mask"].item() == 0.0
    greedy = completion_scores(copier, batch).loc["greedy token"]  # MISSING decodes to 0: the missing -1.0 costs 1.0
    assert greedy["L_obs"] == 0.0 and greedy["L_mask"] == 1.0 and (greedy["acc_obs"], greedy["acc_mask"]) == (1.0, 0.0)


def test_training_starts_copying_the_observed_entries(store):
    cfg = preset_config("smoke_gpt", {"data.n_rows": 2, "data.n_cols": 2, "train.lr": 3e-3, "train.batch": 32,
                               "train.steps": 200, "train.eval_every": 100})
    run = get_or_train(cfg, progress=False)  # ~7 s
    m = run.metrics
    assert m.L.iloc[-20:].mean() < 0.9 * m.L.iloc[:5].mean()
    first, last = m.dropna(subset=["eval_acc_obs"]).iloc[[0, -1]].itertuples()
    # chance is 1/401 per entry; copying shows first at observed entries
    assert last.eval_acc_obs > max(0.05, 3 * first.eval_acc_obs) and last.eval_acc_obs > 3 * last.eval_acc_mask
    with pytest.raises(ValueError, match="trained on cross-entropy: detect_drop does not apply"):
        _ = run.drop
    with pytest.raises(ValueError, match="'L_full' is not one"):
        detect_drop(m, column="L_full")
    with pytest.raises(ValueError, match="'eval_acc_obs' is not one"):
        detect_drop(m, column="eval_acc_obs")
    assert isinstance(run.checkpoint(200), MatrixGPT)


def test_gpt_config_checks_name_the_field():
    gpt = preset_config("cpu_gpt")
    with pytest.raises(ValueError, match=r"2 \* data.n_rows \* data.n_cols must be <= model.max_positions = 33"):
        gpt.override({"data.n_rows": 5})
    with pytest.raises(ValueError, match=r"tokens cover \[-2, 2\]"):
        gpt.override({"data.rank": 3})
    with pytest.raises(ValueError, match="train.component must be left at its default"):
        gpt.override({"train.component": "mlp", "train.init_from": "x"})
    with pytest.raises(ValueError, match="model.arch must be one of"):
        gpt.override({"model.arch": "lstm"})
    assert RunConfig.from_json(gpt.to_json()) == gpt


def test_attention_scores_find_the_copying_offset_and_sep():
    size = 4  # a 2 x 2 matrix: T = 8, SEP at index 4, positions 4..7 write the full matrix
    maps = torch.zeros(2, 1, 8, 8)
    for t in range(4, 8):
        maps[0, 0, t, t - size] = 1.0  # layer 1: the matching masked entry
        maps[1, 0, t, size] = 0.5  # layer 2: half on SEP, half on what it wrote last
        maps[1, 0, t, t] = 0.5
    table = attention_scores(maps, size)
    assert table.loc[(1, 1)].tolist() == [0.0, 0.25, 1.0, 0.0]  # t = 7 copies from index 3 = S - 1
    assert table.loc[(2, 1), "to_sep"] == 0.5 and table.loc[(2, 1), "to_written"] == 0.375  # t = 4 is SEP itself
    assert attention_maps(build_model(preset_config("smoke_gpt").model, seed=0), two_by_two()).shape == (2, 2, 8, 8)


def test_decoded_values_and_copy_onset():
    assert GPT_TOKENS.decode(torch.tensor([0, 1, 401, 404])).tolist() == [0.0, -2.0, 2.0, 0.0]
    metrics = pd.DataFrame({"step": [1, 2, 3, 4], "eval_acc_obs": [0.1, float("nan"), 0.6, 0.9]})
    assert copy_onset(metrics) == 3 and copy_onset(metrics, 0.95) is None


class FixedOdds(MatrixGPT):
    """A stand-in GPT: at every position, logits that put probability 3/4 on the value 0.5 and 1/4 on -0.5."""

    def __init__(self):
        super().__init__(preset_config("smoke_gpt").model)

    def forward(self, ids):
        logits = torch.full((*ids.shape, GPT_TOKENS.vocab_size), -1e9)
        logits[..., GPT_TOKENS.encode(torch.tensor(0.5))] = math.log(3)
        logits[..., GPT_TOKENS.encode(torch.tensor(-0.5))] = 0.0
        return logits


def test_greedy_decoding_reads_the_mode_and_the_softmax_mean_reads_the_mean():
    batch = sample_batch(preset_config("smoke_gpt").data.of_size(2), 3, torch.Generator().manual_seed(0))
    tokens, means = FixedOdds().decode(sequences(batch)[:, :5])
    assert (GPT_TOKENS.decode(tokens) == 0.5).all()  # the mode
    assert torch.allclose(means, torch.full_like(means, 0.75 * 0.5 - 0.25 * 0.5))  # the mean, 0.25
    scores = completion_scores(FixedOdds(), batch)
    assert list(scores.index) == ["greedy token", "softmax mean"] and scores.loc["softmax mean"].isna()["acc_obs"]
    x = batch.values
    assert scores.loc["softmax mean", "L"] == pytest.approx(((x - 0.25) ** 2).mean().item(), rel=1e-5)
    assert scores.loc["greedy token", "L"] == pytest.approx(((x - 0.5) ** 2).mean().item(), rel=1e-5)


def test_late_gain_tells_a_rising_accuracy_from_a_flat_one():
    from matcomp.analysis.gpt import late_gain

    steps = np.arange(25, 4001, 25)
    noise = np.random.default_rng(0).normal(0, 0.02, len(steps))
    rising = pd.DataFrame({"step": steps, "eval_acc_mask": 0.05 + steps / 20000 + noise})
    flat = pd.DataFrame({"step": steps, "eval_acc_mask": 0.3 + noise})
    gain = late_gain(rising, window=1000)
    assert not gain.flat and gain.gain == pytest.approx(1000 / 20000, abs=0.01) and gain.se < 0.01
    assert late_gain(flat, window=1000).flat and late_gain(flat).window == 1000  # a quarter of the run
    with pytest.raises(ValueError, match="at least 2 evaluations.*a shorter window"):
        late_gain(flat, window=5000)
