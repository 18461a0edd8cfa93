"""Shared fixtures: a micro config that trains in about a second, and an isolated run store."""

import pytest
import torch

from matcomp.config import DataConfig, ModelConfig, RunConfig, TrainConfig

torch.set_num_threads(1)  # tests are many and tiny: one thread each avoids oversubscription


@pytest.fixture
def micro() -> RunConfig:
    return RunConfig(
        name="micro",
        data=DataConfig(n_rows=3, n_cols=3, rank=1, p_mask=0.3),
        model=ModelConfig(hidden=16, layers=1, heads=2),
        train=TrainConfig(steps=40, batch=16, lr=3e-3, eval_every=10, eval_batch=8, checkpoint_every=10,
                          checkpoint_steps=(15,)),
    )


@pytest.fixture
def store(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    monkeypatch.setenv("MATCOMP_RUNS", str(root))
    return root
