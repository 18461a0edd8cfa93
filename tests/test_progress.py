"""Progress measures: each measure on known inputs, the onset rule, and the per-run cache."""

import numpy as np
import pandas as pd
import pytest
import torch

import matcomp.analysis.progress
from matcomp.analysis.evaluation import losses
from matcomp.analysis.progress import (
    L_MASK,
    MEASURES,
    _mean_abs_cos,
    checkpoint_measures,
    lead_summary,
    lead_table,
    onset,
    progress_configs,
    progress_derivation,
    progress_table,
    smoothing_sensitivity,
    trailing_mean,
)
from matcomp.config import DataConfig, ModelConfig
from matcomp.data import sample_batch
from matcomp.models.factory import build_model
from matcomp.presets import preset_config
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
    batch = sample_batch(data, 64, torch.Generator().manual_seed(0))
    out = checkpoint_measures(model, batch)
    assert list(out) == list(MEASURES)
    assert out[L_MASK] == pytest.approx(losses(model, batch)["L_mask"], rel=1e-6)  # the loss on the same batch
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


def test_smoothing_is_a_trailing_mean_that_never_reads_a_later_checkpoint():
    table = pd.DataFrame({"a": [0.0, 3.0, 6.0, 9.0]}, index=[0, 50, 100, 150])
    assert trailing_mean(table, 1).equals(table)
    assert trailing_mean(table, 3)["a"].tolist() == [0.0, 1.5, 3.0, 6.0]
    spiked = table.copy()
    spiked.loc[150, "a"] = 100.0
    assert trailing_mean(spiked, 3).loc[:100].equals(trailing_mean(table, 3).loc[:100])  # the future changes nothing
    with pytest.raises(ValueError, match="window must be >= 1"):
        trailing_mean(table, 0)


def test_lead_over_the_loss_compares_onsets_on_the_same_table():
    steps = np.arange(0, 6001, 250)
    rng = np.random.default_rng(1)
    noise = rng.normal(0, 0.01, (len(steps), 3))
    loss = 1 - np.where(steps >= 5250, (steps - 5000) / 1000, 0.0) + noise[:, 0]
    early = np.where(steps >= 4500, (steps - 4250) / 250, 0.0) + noise[:, 1]
    table = lead_table(pd.DataFrame({L_MASK: loss, "early": early, "flat": noise[:, 2]}, index=steps), drop_step=6000)
    assert table.loc[L_MASK, "onset step"] == 5250 and table.loc["early", "onset step"] == 4500
    lead = table["lead over the loss (steps)"]
    assert lead["early"] == 750 and lead[L_MASK] == 0
    assert pd.isna(lead["flat"])


def _leads(values: dict[tuple[int, int], float]) -> pd.DataFrame:
    index = pd.MultiIndex.from_tuples(list(values), names=["seed", "window"])
    return pd.DataFrame({"drop step": 5000, "loss onset": 4000, "m": pd.array(list(values.values()), dtype="Int64"),
                         "first to move": "m"}, index=index)


def test_lead_summary_counts_seeds_ahead_by_more_than_the_margin_and_takes_the_median():
    by_seed = _leads({(0, 1): 50, (1, 1): 400, (2, 1): -100, (0, 3): 200, (1, 3): 600, (2, 3): None})
    summary = lead_summary(by_seed, margin=50)
    assert summary.loc["m", (1, "seeds ahead")] == "1/3"  # 50 is one checkpoint: not ahead
    assert summary.loc["m", (1, "median lead")] == 50 and summary.loc["m", (3, "median lead")] == 400
    assert lead_summary(by_seed).loc["m", (1, "seeds ahead")] == "2/3"
    sensitivity = smoothing_sensitivity(by_seed, margin=50)
    assert sensitivity.loc["m", "largest change (steps)"] == 200  # seed 1: 400 -> 600, seed 0: 50 -> 200
    assert sensitivity.loc["m", "seeds whose verdict changes"] == "1/3"  # seed 0 is ahead only smoothed


def test_progress_runs_are_checkpointed_densely_and_stop_after_the_drop():
    cpu = preset_config("cpu")
    configs = progress_configs(cpu, range(5), after_drop=2000)
    assert list(configs) == [0, 1, 2, 3, 4] and configs[3].train.seed == 3
    assert {c.train.checkpoint_every for c in configs.values()} == {50}
    assert {c.train.stop_after_drop for c in configs.values()} == {2000}
    assert progress_configs(preset_config("smoke"), [0], 100)[0].train.checkpoint_every == 10  # never denser than 10


def test_progress_table_is_a_derived_table_keyed_by_the_run_s_checkpoints(micro, store, monkeypatch):
    run = get_or_train(micro, progress=False)
    first = progress_table(run, samples=16)
    assert list(first.index) == run.steps and list(first.columns) == list(MEASURES)
    derivation = progress_derivation(run, samples=16)
    assert [c["step"] for c in derivation.inputs()["checkpoints"]] == run.steps
    assert "matcomp.analysis.heads" in derivation.sources()  # the code that scores the heads keys it too
    assert (store / "derived" / f"{derivation.stem()}.measures.csv").exists()
    monkeypatch.setattr(matcomp.analysis.progress, "measures_over_training", lambda *a: pytest.fail("computed twice"))
    pd.testing.assert_frame_equal(progress_table(run, samples=16), first, check_exact=True)
    assert progress_derivation(run, samples=8).key() != derivation.key()  # other matrices: another table


def test_leads_need_a_drop_and_seeds_without_one_get_an_empty_column(micro, store):
    from matcomp.analysis.progress import leads_over_seeds, run_leads

    cfg = micro.override({"train.steps": 150, "train.checkpoint_every": 50})
    run = get_or_train(cfg, progress=False)
    assert not run.drop.dropped
    with pytest.raises(ValueError, match="shows no drop"):
        run_leads(run)
    table = leads_over_seeds({0: run}, (1, 3), samples=16)
    assert table.index.get_level_values("seed").tolist() == [0] and table["drop step"].isna().all()
    assert lead_summary(table).empty


def test_measures_of_a_shipped_run_are_cached_in_the_working_store_not_beside_it(micro, store, tmp_path,
                                                                               monkeypatch):
    import matcomp.runs.shipped
    from matcomp.runs.shipped import export_reference

    monkeypatch.setattr(matcomp.runs.shipped, "REFERENCE_ROOT", tmp_path / "reference")
    shipped = export_reference(get_or_train(micro, progress=False), [0, 20, 40], command="python -m matcomp ...")
    progress_table(shipped, samples=8)
    assert not (tmp_path / "reference" / "progress").exists()  # the repository's folder is left alone
    assert (store / "derived" / f"{progress_derivation(shipped, samples=8).stem()}.measures.csv").exists()
    monkeypatch.setattr(matcomp.analysis.progress, "measures_over_training", lambda *a: pytest.fail("computed twice"))
    progress_table(shipped, samples=8)  # found in the working store


def test_against_uniform_reads_each_measure_as_a_multiple_of_what_a_copying_model_gives():
    from types import SimpleNamespace

    from matcomp.analysis.progress import L_MASK, against_uniform

    cfg = preset_config("cpu").override({"data.n_rows": 6, "data.n_cols": 5, "data.rank": 2})
    uniform_row, uniform_column = 4 / 30, 5 / 30  # (n − 1)/mn and (m − 1)/mn
    table = pd.DataFrame({"row attention": [uniform_row, 3 * uniform_row], "column attention": [uniform_column] * 2,
                          L_MASK: [2 / 9, 1 / 9], "collapse (missing)": [0.99, 0.7]}, index=[1000, 2000])
    read = against_uniform(SimpleNamespace(config=cfg), table)
    assert read["best row head / uniform"].tolist() == pytest.approx([1.0, 3.0])
    assert read["best column head / uniform"].tolist() == pytest.approx([1.0, 1.0])
    assert read["L_mask / E[X²]"].tolist() == pytest.approx([1.0, 0.5])  # rank 2: E[X²] = 2/9
    assert read["collapse (missing)"].tolist() == [0.99, 0.7]
