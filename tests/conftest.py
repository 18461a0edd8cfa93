"""Shared fixtures: a micro config that trains in about a second, and an isolated run store."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from matcomp.config import RunConfig


def pytest_collection_finish(session):
    """One thread a process where the tests run: they are many and tiny, and a second thread only contends. Set here,
    not on import, so that pytest-xdist's controller, which collects and runs nothing, starts its workers without
    importing PyTorch (2.4 s)."""
    import torch

    torch.set_num_threads(1)


@pytest.fixture
def micro() -> RunConfig:
    from matcomp.config import DataConfig, ModelConfig, RunConfig, TrainConfig

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
