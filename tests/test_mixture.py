"""Training on a mixture of matrix sizes (App. I): per-size evaluation, validation, old ids kept."""

import dataclasses

import pytest
import torch

from matcomp.config import DataConfig, RunConfig
from matcomp.presets import preset_config
from matcomp.runs.store import get_or_train
from matcomp.runs.training import columns, train_step


def mixture(micro: RunConfig) -> RunConfig:
    return micro.override({"data.sizes": [2, 3], "data.n_rows": 3, "data.n_cols": 3})


def test_every_size_is_evaluated_on_its_own(micro, store):
    run = get_or_train(mixture(micro), progress=False)
    m = run.metrics.dropna(subset=["eval_L"])
    assert list(m.columns) == list(columns(run.config))
    assert {"eval_L_mask_n2", "eval_L_mask_n3"} <= set(m.columns) and len(m) == 4
    # eval_* is the largest size, drawn from the same eval batch as eval_*_n3
    assert (m.eval_L == m.eval_L_n3).all() and (m.eval_L_n2 != m.eval_L_n3).all()


def test_each_step_draws_one_size_for_the_whole_batch(micro, monkeypatch):
    seen = []
    import matcomp.runs.training

    real = matcomp.runs.training.sample_batch
    monkeypatch.setattr(matcomp.runs.training, "sample_batch",
                        lambda data, *a, **k: seen.append(data.n_rows) or real(data, *a, **k))
    cfg = mixture(micro)
    model, optimizer, gen, _ = matcomp.runs.training.init_training(cfg, torch.device("cpu"))
    for _ in range(40):
        train_step(model, optimizer, cfg, gen, torch.device("cpu"))
    assert set(seen) == {2, 3} and 10 < seen.count(2) < 30


def test_sizes_are_validated_and_old_runs_keep_their_ids():
    assert preset_config("cpu").run_id == "cpu-f603ff8bc5"  # the shipped default run
    with pytest.raises(ValueError, match=r"data.n_rows and data.n_cols must be both equal to max\(data.sizes\) = 5"):
        DataConfig(n_rows=4, n_cols=4, rank=1, sizes=(3, 5))
    with pytest.raises(ValueError, match=r"data.sizes must be distinct integers in \[data.rank, 64\]"):
        DataConfig(n_rows=4, n_cols=4, rank=2, sizes=(1, 4))
    with pytest.raises(ValueError, match="data.sizes must be distinct"):
        DataConfig(n_rows=4, n_cols=4, rank=1, sizes=(4, 4))
    cfg = DataConfig(n_rows=4, n_cols=4, rank=1, sizes=[3, 4])
    assert cfg.sizes == (3, 4) and cfg.of_size(3) == dataclasses.replace(cfg, n_rows=3, n_cols=3, sizes=())
