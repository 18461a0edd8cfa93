"""Training one component at a time: the groups, the frozen copy and a run that moves only its group."""

import numpy as np
import pandas as pd
import pytest
import torch

from matcomp.analysis.components import component_config, plateau_table
from matcomp.config import ModelConfig
from matcomp.models.factory import build_model
from matcomp.models.recipe import COMPONENT_PATTERNS, component_names, freeze_all_but
from matcomp.presets import preset_config
from matcomp.runs.store import get_or_train
from matcomp.sizes import chapter_sizes


def test_groups_split_the_trainable_parameters():
    model = build_model(ModelConfig(hidden=16, layers=2, heads=2), seed=0)
    groups = {c: set(component_names(model, c)) for c in COMPONENT_PATTERNS}
    names = [n for n, p in model.named_parameters()]
    for a in groups:
        for b in groups:
            assert a == b or not groups[a] & groups[b]
    left = set(names) - set().union(*groups.values())
    assert left == {"bert.embeddings.token_type_embeddings.weight", "readout.weight", "readout.bias"}
    assert "bert.embeddings.LayerNorm.weight" in groups["token"]
    assert "bert.encoder.layer.1.attention.output.LayerNorm.bias" in groups["attention"]
    assert "bert.encoder.layer.1.output.LayerNorm.bias" in groups["mlp"]
    with pytest.raises(ValueError, match="component must be one of"):
        component_names(model, "readout")


def test_freeze_all_but_copies_and_freezes_everything_else():
    cfg = ModelConfig(hidden=16, layers=1, heads=2)
    trained = build_model(cfg, seed=1).state_dict()
    fresh = build_model(cfg, seed=2)
    freeze_all_but(fresh, trained, "position")
    for name, param in fresh.named_parameters():
        if name == "bert.embeddings.position_embeddings.weight":
            assert param.requires_grad and not torch.equal(param, trained[name])
        else:
            assert not param.requires_grad and torch.equal(param, trained[name])
    with pytest.raises(ValueError, match="different model shape|has shape"):
        freeze_all_but(build_model(ModelConfig(hidden=32, layers=1, heads=2), seed=0), trained, "mlp")


def test_a_component_run_moves_only_its_component(micro, store):
    base = get_or_train(micro, progress=False)
    cfg = micro.override({"train.component": "mlp", "train.init_from": base.path.name})
    run = get_or_train(cfg, progress=False)
    final = base.folder.read_checkpoint(40)
    start, end = run.folder.read_checkpoint(0), run.folder.read_checkpoint(40)
    mlp = set(component_names(run.checkpoint(0), "mlp"))
    for name, value in end.items():
        if name in mlp and name.endswith("weight") and "LayerNorm" not in name:
            assert not torch.equal(value, start[name]) and not torch.equal(start[name], final[name])
        elif name not in mlp and name in final:
            assert torch.equal(value, final[name])
    fresh = build_model(micro.model, seed=micro.train.seed).state_dict()
    assert all(torch.equal(start[name], fresh[name]) for name in mlp)  # re-initialised as BERT does


def test_init_from_an_unknown_run_is_a_clear_error(micro, store):
    cfg = micro.override({"train.component": "token", "train.init_from": "micro-0000000000"})
    with pytest.raises(ValueError, match="train.init_from names run 'micro-0000000000'"):
        get_or_train(cfg, progress=False)


def test_component_config_names_the_group_and_the_trained_run():
    cfg = component_config(preset_config("cpu"), "position", "cpu-f603ff8bc5", 20000, 2000)
    assert (cfg.train.component, cfg.train.init_from, cfg.train.steps) == ("position", "cpu-f603ff8bc5", 20000)
    assert cfg.train.stop_after_drop == 2000  # the whole budget, stopping 2,000 steps after the drop
    assert component_config(preset_config("cpu"), "position", "cpu-f603ff8bc5", 6000).train.stop_after_drop == 0
    assert chapter_sizes("smoke").steps("component_steps", preset_config("smoke")) == preset_config("smoke").train.steps
    with pytest.raises(ValueError, match="component must be one of"):
        component_config(preset_config("cpu"), "layernorm", "cpu-f603ff8bc5", 100)


def test_plateau_table_tells_a_plateau_from_a_quick_fall():
    step = np.arange(1, 3001)
    plateau_then_drop = 0.11 - 0.1 / (1 + np.exp(-(step - 2000) / 30))
    quick_fall = 0.02 + 0.09 * np.exp(-step / 20)
    curves = {name: pd.DataFrame({"step": step, "L_mask": values})
              for name, values in (("slow", plateau_then_drop), ("fast", quick_fall))}
    table = plateau_table(curves, level=0.11, min_plateau=500)
    assert table.loc["slow", "plateau"] == "yes" and 1900 < table.loc["slow", "leaves the plateau"] < 2000
    assert 1950 < table.loc["slow", "below half"] < 2050
    assert table.loc["fast", "plateau"] == "no" and table.loc["fast", "leaves the plateau"] == 101
    assert table.loc["fast", "final L_mask"] == pytest.approx(0.02, abs=1e-3)
    assert table.loc["slow", "fall"] == "sudden" and table.loc["slow", "fall (steps)"] < 150
    assert table.loc["fast", "fall"] == "no plateau before it"  # a fall with no plateau before it: not sudden
    gradual = pd.DataFrame({"step": step, "L_mask": np.interp(step, [0, 600, 3000], [0.11, 0.11, 0.02])})
    table = plateau_table({"gradual": gradual}, level=0.11, min_plateau=500)
    assert table.loc["gradual", "plateau"] == "yes" and table.loc["gradual", "fall"] == "gradual"
    assert 1000 < table.loc["gradual", "fall (steps)"] < 1300


def test_fig8_checks_read_each_part_of_the_papers_reading():
    from matcomp.analysis.components import fig8_checks

    table = pd.DataFrame({"plateau": ["yes", "no", "yes", "no"],
                          "leaves the plateau": pd.array([561, 101, 17289, 101], dtype="Int64"),
                          "below half": pd.array([2703, 101, 19500, 124], dtype="Int64")},
                         index=["attention", "mlp", "position", "token"])
    assert all(fig8_checks(table).values())
    table.loc["position", "below half"] = pd.NA  # the positions leave their plateau but do not halve it in the budget
    checks = fig8_checks(table)
    assert not checks["position embeddings: a plateau, then a sudden drop"]
    assert checks["position embeddings: the longest plateau"]
    table.loc["attention", "leaves the plateau"] = pd.NA  # attention never leaves: the positions' is not the longest
    assert not fig8_checks(table)["position embeddings: the longest plateau"]
    table["fall"] = ["gradual", None, "sudden", None]  # attention falls to half more slowly than it sat: no drop
    assert not fig8_checks(table)["attention: a plateau, then a sudden drop"]
