"""The paper's model in the one-model chapters' figures (``matcomp.book.paper_model``): which runs are read, what
their captions say, and the computations its figures add (the head maps and families from one forward pass, the
probe tables stored beside a run, the paper's model's p_mask sweep)."""

import pandas as pd
import pytest
import torch

from matcomp.analysis.evaluation import copy_check, losses
from matcomp.analysis.heads import classify_model, mean_maps
from matcomp.analysis.interventions import attention_interventions
from matcomp.analysis.patching import all_layers, last_layer, negation_patching, per_head, per_layer
from matcomp.analysis.positions import permuted_losses
from matcomp.analysis.probing import probe_layers
from matcomp.analysis.stored_copying import POST_SHIFT_MODEL, stored_copying
from matcomp.analysis.stored_interventions import PERMUTED, stored_interventions
from matcomp.analysis.stored_patching import stored_patching
from matcomp.analysis.stored_probes import probes_derivation, stored_probes
from matcomp.book.chapters.attention_patching import paper_patching_derivation
from matcomp.book.chapters.copying_phase import paper_copying_derivation
from matcomp.book.chapters.head_taxonomy import maps_and_families
from matcomp.book.chapters.nuclear_norm import Parameters, paper_sweep_derivation
from matcomp.book.chapters.observed_entries import paper_interventions_derivation
from matcomp.book.chapters.ood import paper_panel_derivations, paper_panels
from matcomp.book.chapters.probing import paper_probes_derivation
from matcomp.book.paper_model import absent_text, described, described_runs, paper_model, paper_runs
from matcomp.config import DataConfig, ModelConfig
from matcomp.data import sample_batch
from matcomp.models.factory import build_model
from matcomp.runs.store import get_or_train
from matcomp.seeding import analysis_generator


def test_the_default_scale_reads_the_shipped_paper_model_and_both_runs_of_its_seed():
    run, phases = paper_model("cpu")
    assert (run.config.run_id, phases.pre, phases.post) == ("paper-d34517864a", 4000, 29000)
    assert described(run) == ("the paper's model (7×7 rank 2, hidden 768, 4 layers, 8 heads; seed 0), run "
                              "paper-d34517864a trained on NVIDIA H200, stopped at step 29,000 of the paper's 50,000")
    runs = paper_runs("cpu")
    assert [(r.config.run_id, r.last_step, r.drop.half_step) for r in runs] == [
        ("paper-08fef206d2", 32000, 15783), ("paper-d34517864a", 29000, 22973)]
    assert described_runs(runs).endswith("trained 2 times: run paper-08fef206d2 on NVIDIA H200, stopped at step "
                                         "32,000 of the paper's 50,000; run paper-d34517864a on NVIDIA H200, stopped "
                                         "at step 29,000 of the paper's 50,000")
    with pytest.raises(ValueError, match="at least one run"):
        described_runs([])


def test_a_scale_without_the_paper_model_says_so_and_derives_nothing_for_it():
    assert paper_model("smoke") is None and paper_runs("smoke") == []
    assert absent_text("smoke").startswith("The paper's own model is not shipped with its checkpoints at the smoke "
                                           "scale (it is at the default scale, cpu")
    assert paper_probes_derivation("smoke") is None and paper_sweep_derivation("smoke") is None
    assert paper_interventions_derivation("smoke") is None and paper_patching_derivation("smoke") is None
    assert paper_copying_derivation("smoke") is None
    assert paper_panel_derivations("smoke", 64, 2) == {} and paper_panels("smoke", 64, 2) is None


def test_the_paper_models_derived_tables_are_named_by_its_run_and_keep_the_chapters_parameters():
    probes, sweep = paper_probes_derivation("cpu"), paper_sweep_derivation("cpu")
    assert probes.name == "probe_layers_paper-d34517864a" and sweep.name == "completion_sweep_paper-d34517864a"
    assert [(c["run"], c["step"]) for c in probes.inputs()["checkpoints"]] == [("paper-d34517864a", 29000)]
    assert probes.params["train_matrices"] == 2048 and probes.params["test_matrices"] == 256
    assert sweep.params["samples"] == 512 and sweep.params["data"]["rank"] == 2
    interventions = paper_interventions_derivation("cpu")
    assert interventions.name == "interventions_paper-d34517864a"
    assert [(c["run"], c["step"]) for c in interventions.inputs()["checkpoints"]] == [("paper-d34517864a", 4000),
                                                                                     ("paper-d34517864a", 29000)]
    assert (interventions.params["samples"], interventions.params["permutations"]) == (256, 5)
    copying = paper_copying_derivation("cpu")  # Table 1 on its pre-shift checkpoint, the paper's step 4,000
    assert copying.name == "copying_paper-d34517864a"
    assert [(c["run"], c["step"]) for c in copying.inputs()["checkpoints"]] == [("paper-d34517864a", 4000),
                                                                               ("paper-d34517864a", 29000)]
    assert (copying.params["copy_samples"], copying.params["ablation_samples"]) == (512, 256)
    patching = paper_patching_derivation("cpu")
    assert patching.name == "patching_paper-d34517864a" and patching.params["samples"] == 256
    assert [(c["run"], c["step"]) for c in patching.inputs()["checkpoints"]] == [("paper-d34517864a", 29000)]
    panels = paper_panel_derivations("cpu", 1024, 2)  # its own rank panel: trained on rank 2, it is read on itself
    assert {axis: d.name for axis, d in panels.items()} == {axis: f"ood_{axis}_paper-d34517864a"
                                                           for axis in ("rank", "rows", "columns")}
    around = [5, 6, 7, 8, 9]
    assert {axis: d.params["values"] for axis, d in panels.items()} == {"rank": [1, 2, 3, 4, 5, 6, 7], "rows": around,
                                                                       "columns": around}
    assert all([(c["run"], c["step"]) for c in d.inputs()["checkpoints"]] == [("paper-d34517864a", 29000)]
               for d in panels.values())
    fewer = paper_sweep_derivation("cpu", Parameters(samples=64, p_masks=[0.3]))
    assert fewer.params["samples"] == 64 and fewer.params["p_masks"] == [0.3] and fewer.key() != sweep.key()


def test_maps_and_families_equal_mean_maps_and_classify_model_from_one_pass():
    data = DataConfig(n_rows=3, n_cols=4, rank=1)
    model = build_model(ModelConfig(hidden=16, layers=2, heads=2), seed=0)
    batch = sample_batch(data, 32, torch.Generator().manual_seed(0))
    maps, families = maps_and_families(model, batch, mass=0.3, enrichment=1.5)
    assert maps.shape == (2, 2, 12, 12)
    torch.testing.assert_close(maps, mean_maps(model, batch))
    pd.testing.assert_frame_equal(families, classify_model(model, batch, mass=0.3, enrichment=1.5))


def test_stored_probes_are_the_chapters_probes_computed_once_and_read_back(micro, store):
    run = get_or_train(micro, progress=False)
    step = run.steps[-1]
    tables = stored_probes(run, step, 64, 16, ("row", "element"))
    train = sample_batch(micro.data, 64, analysis_generator(0))
    test = sample_batch(micro.data, 16, analysis_generator(1))
    assert list(tables) == ["row", "element"]
    for target, table in tables.items():
        pd.testing.assert_frame_equal(table, probe_layers(run.bert(step), train, test, target))
    assert list((store / "derived").glob(f"probe_layers_{run.path.name}-*.json"))  # stored under its run's name
    again = stored_probes(run, step, 64, 16, ("row", "element"))
    pd.testing.assert_frame_equal(again["element"], tables["element"])
    with pytest.raises(ValueError, match="targets must be some of"):
        probes_derivation(run, step, 64, 16, ("column",))


def test_stored_interventions_are_the_chapters_interventions_computed_once_and_read_back(micro, store):
    run = get_or_train(micro, progress=False)
    pre, post = run.steps[1], run.steps[-1]
    tables = stored_interventions(run, pre, post, 32, 3, 2)
    batch = sample_batch(micro.data, 32, analysis_generator(3))
    expected = attention_interventions(run.bert(post), run.bert(pre), batch, "pre-shift")
    permuted = permuted_losses(run.bert(post), batch, seeds=range(2))
    pd.testing.assert_frame_equal(tables["interventions"].drop(PERMUTED), expected)
    assert tables["interventions"].loc[PERMUTED].tolist() == permuted.loc[["L_obs", "L_mask"], "mean"].tolist()
    pd.testing.assert_frame_equal(tables["permuted"], permuted)
    assert list((store / "derived").glob(f"interventions_{run.path.name}-*.json"))  # stored under its run's name
    again = stored_interventions(run, pre, post, 32, 3, 2)
    pd.testing.assert_frame_equal(again["interventions"], tables["interventions"])
    with pytest.raises(ValueError, match="samples"):
        stored_interventions(run, pre, post, 0, 3, 2)


def test_stored_copying_is_the_chapters_copy_table_and_pre_shift_interventions_read_back(micro, store):
    run = get_or_train(micro, progress=False)
    pre, post = run.steps[1], run.steps[-1]
    tables = stored_copying(run, pre, post, 24, 16, 3)
    pd.testing.assert_frame_equal(tables["copy"], copy_check(run.bert(pre), micro.data, 24, 3))
    batch = sample_batch(micro.data, 16, analysis_generator(3))
    expected = attention_interventions(run.bert(pre), run.bert(post), batch, "post-shift")
    pd.testing.assert_frame_equal(tables["interventions"].drop(POST_SHIFT_MODEL), expected)
    assert tables["interventions"].loc[POST_SHIFT_MODEL].tolist() == [losses(run.bert(post), batch)[name]
                                                                      for name in ("L_obs", "L_mask")]
    assert list((store / "derived").glob(f"copying_{run.path.name}-*.json"))  # stored under its run's name
    pd.testing.assert_frame_equal(stored_copying(run, pre, post, 24, 16, 3)["copy"], tables["copy"])
    with pytest.raises(ValueError, match="ablation_samples"):
        stored_copying(run, pre, post, 24, 0, 3)


def test_stored_patching_is_the_chapters_patching_of_layers_and_heads_computed_once_and_read_back(micro, store):
    run = get_or_train(micro, progress=False)
    step, (L, H) = run.steps[-1], (micro.model.layers, micro.model.heads)
    tables = stored_patching(run, step, 16, 2)
    batch = sample_batch(micro.data, 16, analysis_generator(2))
    model = run.bert(step)
    layers = negation_patching(model, batch, {**all_layers(L, H), **last_layer(L, H), **per_layer(L, H)})
    pd.testing.assert_frame_equal(tables["layers"], layers)
    pd.testing.assert_frame_equal(tables["heads"], negation_patching(model, batch, per_head(L, H), references=False))
    assert list((store / "derived").glob(f"patching_{run.path.name}-*.json"))  # stored under its run's name
    pd.testing.assert_frame_equal(stored_patching(run, step, 16, 2)["heads"], tables["heads"])
