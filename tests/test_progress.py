"""Progress measures: each measure on known inputs, the onset rule, and the per-run cache."""

import numpy as np
import pandas as pd
import pytest
import torch

import matcomp.analysis.progress
from matcomp.analysis.progress import MEASURES, _mean_abs_cos, checkpoint_measures, lead_table, onset, progress_table
from matcomp.config import DataConfig, ModelConfig
from matcomp.data import sample_batch
from matcomp.models.factory import build_model
from matcomp.runs.store import get_or_train


def test_mean_abs_cos_is_one_for_parallel_and_zero_for_orthogonal_states():
    parallel = torch.tensor([[[1.0, 0.0], [-2.0, 0.0], [3.0, 0.0]]])
    orthogonal = torch.eye(3)[None]
    everywhere = torch.ones(1, 3, dtype=torch.bool)
    assert _mean_abs_cos(parallel, everywhere) == pytest.approx(1.0)
    assert _mean_abs_cos(orthogonal, everywhere) == pytest.approx(0.0)
    assert np.isnan(_mean_abs_cos(parallel, torch.tensor([[True, False, False]])))  # no pair


def test_a_fresh_model_attends_uniformly_and_every_measure_is_there():
    data = DataConfig(n_rows=4, n_cols=4, rank=1)
    model = build_model(ModelConfig(hidden=32, layers=2, heads=2), seed=0).set_attention("eager")
    out = checkpoint_measures(model, sample_batch(data, 64, torch.Generator().manual_seed(0)))
    assert list(out) == list(MEASURES)
    assert out["row attention"] == pytest.approx(3 / 16, abs=0.01)  # BERT init: near-uniform attention
    assert out["column attention"] == pytest.approx(3 / 16, abs=0.01)
    assert 0 < out["prediction spread"] and -1 <= out["column clustering"] <= 1
    norm = torch.sqrt(sum((p ** 2).sum() for n, p in model.named_parameters() if "position_embeddings" in n))
    assert out["‖position‖"] == pytest.approx(norm.item())


def test_onset_finds_the_first_lasting_move_and_ignores_noise():
    steps = np.arange(0, 6001, 250)
    rng = np.random.default_rng(0)
    flat = pd.Series(rng.normal(0, 0.01, len(steps)), index=steps)
    assert onset(flat, drop_step=6000) is None  # noise alone never "moves"
    ramp = flat + np.where(steps >= 5000, (steps - 4750) / 250, 0.0)
    assert onset(ramp, drop_step=6000) == 5000
    blip = ramp.copy()
    blip[4250] = 5.0  # one excursion that comes back does not count
    assert onset(blip, drop_step=6000) == 5000
    table = lead_table(pd.DataFrame({"ramp": ramp, "flat": flat}), drop_step=6000)
    assert table.loc["ramp", "lead (steps)"] == 1000 and pd.isna(table.loc["flat", "onset step"])
    with pytest.raises(ValueError, match="middle third of the plateau"):
        onset(ramp, drop_step=600)


def test_progress_table_is_cached_beside_the_run(micro, store, monkeypatch):
    run = get_or_train(micro, progress=False)
    first = progress_table(run, samples=16)
    assert list(first.index) == run.steps and list(first.columns) == list(MEASURES)
    assert (store / "progress" / f"{micro.run_id}-n16-s0.csv").exists()
    monkeypatch.setattr(matcomp.analysis.progress, "measures_over_training", lambda *a: pytest.fail("computed twice"))
    pd.testing.assert_frame_equal(progress_table(run, samples=16), first, check_exact=False, rtol=1e-12)


def test_leads_need_a_drop_and_seeds_without_one_get_an_empty_column(micro, store):
    from matcomp.analysis.progress import leads_over_seeds, run_leads

    cfg = micro.override({"train.steps": 150, "train.checkpoint_every": 50})
    run = get_or_train(cfg, progress=False)
    assert not run.drop.dropped
    with pytest.raises(ValueError, match="shows no drop"):
        run_leads(run)
    table = leads_over_seeds(cfg, [0], samples=16)
    assert list(table.columns) == ["seed 0"] and table["seed 0"].isna().all()


def test_measures_of_a_shipped_run_are_cached_in_the_working_store_not_beside_it(micro, store, tmp_path,
                                                                               monkeypatch):
    import matcomp.runs.shipped
    from matcomp.runs.shipped import export_reference

    monkeypatch.setattr(matcomp.runs.shipped, "REFERENCE_ROOT", tmp_path / "reference")
    shipped = export_reference(get_or_train(micro, progress=False), [0, 20, 40], command="python -m matcomp ...")
    progress_table(shipped, samples=8)
    assert not (tmp_path / "reference" / "progress").exists()  # the repository's folder is left alone
    assert (store / "progress" / f"{micro.run_id}-n8-s0.csv").exists()
    monkeypatch.setattr(matcomp.analysis.progress, "measures_over_training", lambda *a: pytest.fail("computed twice"))
    progress_table(shipped, samples=8)  # found in the working store
