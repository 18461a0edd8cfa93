"""The drop step's spread under rounding: one initial weight moved by one unit in the last place."""

import pytest
import torch

from matcomp.analysis.drop_spread import NUDGED, nudge_indices, nudged_configs
from matcomp.config import ModelConfig, RunConfig
from matcomp.models.factory import build_model
from matcomp.models.recipe import nudge_weight
from matcomp.presets import preset_config


def test_a_nudge_moves_one_weight_by_one_unit_in_the_last_place():
    model = build_model(ModelConfig(hidden=16, layers=1, heads=2), seed=0)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    first = next(iter(before.values())).numel()
    where = nudge_weight(model, first + 3)  # the third weight of the second tensor
    second, value = list(before)[1], list(before.values())[1].view(-1)[2]
    assert where == f"{second}[2]"
    changed = {name: int((p.detach() != before[name]).sum()) for name, p in model.named_parameters()}
    assert changed == {name: int(name == second) for name in before}
    moved = dict(model.named_parameters())[second].detach().view(-1)[2]
    assert moved > value and moved - value == torch.finfo(torch.float32).eps * 2.0 ** torch.frexp(value).exponent / 2


def test_a_nudge_past_the_last_weight_names_the_count():
    model = build_model(ModelConfig(hidden=16, layers=1, heads=2), seed=0)
    total = sum(p.numel() for p in model.parameters())
    with pytest.raises(ValueError, match=f"at most the model's {total:,} weights; got {total + 1:,}"):
        nudge_weight(model, total + 1)
    with pytest.raises(ValueError, match="train.init_nudge"):
        preset_config("cpu", {"train.init_nudge": -1})


def test_no_nudge_keeps_every_shipped_hash_and_a_nudge_is_a_new_run():
    cfg = preset_config("cpu")
    d = cfg.to_dict()
    del d["train"]["init_nudge"]  # a config written before the field existed
    assert RunConfig.from_dict(d).hash == cfg.hash
    assert cfg.override({"train.init_nudge": 1}).hash != cfg.hash


def test_each_nudge_is_the_first_weight_of_a_tensor_every_pass_reads():
    cfg = preset_config("cpu")
    indices = nudge_indices(cfg)
    assert list(indices) == list(NUDGED) and len(set(indices.values())) == 8
    for name, k in indices.items():
        assert nudge_weight(build_model(cfg.model, seed=0), k) == f"{name}[0]"
    configs = nudged_configs(cfg, range(2), 3)
    assert len(configs) == 6 and {c.train.stop_after_drop for c in configs.values()} == {250}
    assert configs[1, NUDGED[2]].train.seed == 1 and configs[1, NUDGED[2]].train.init_nudge == indices[NUDGED[2]]
    with pytest.raises(ValueError, match="at most the 8 tensors"):
        nudge_indices(cfg, 9)


def test_the_shipped_nudged_runs_give_each_seed_its_spread_beside_the_paper_seed_trained_twice():
    from matcomp.book.chapter import chapter_config, open_run
    from matcomp.book.chapters.sudden_drop import nudged_spread, paper_seed_runs, spread_sentences

    cfg = chapter_config("cpu")
    nudged = nudged_spread(cfg, "cpu")  # shipped with their metrics alone: nothing trains
    assert list(nudged.table.index) == [0, 1] and (nudged.table["nudged runs"] == 8).all()
    for seed in (0, 1):
        own = open_run(cfg.override({"train.seed": seed}), "cpu").drop.half_step
        steps = nudged.steps.xs(seed, level="seed")["drop step"].astype(float)
        row = nudged.table.loc[seed]
        assert row["own drop step"] == own and row["no drop"] == 0 and len(set(steps)) > 1
        assert (row["lowest"], row["highest"]) == (steps.min(), steps.max())
    paper = paper_seed_runs("cpu")
    said = spread_sentences(nudged, paper)
    assert len(paper) == 2 and {r.config.train.seed for r in paper} == {0}
    assert len(said) == 1 and "twice" in said[-1] and f"{sorted(r.drop.half_step for r in paper)[-1]:,}" in said[-1]
    assert spread_sentences(None, [])[0].startswith("The drop step's spread under rounding is measured on the `cpu`")


def test_a_sweep_point_or_another_seed_measures_no_spread_rather_than_train_sixteen_runs():
    from matcomp.book.chapter import chapter_config
    from matcomp.book.chapters.sudden_drop import nudged_configs, nudged_spread

    assert len(nudged_configs(chapter_config("cpu"), "cpu")) == 16
    for cfg in (chapter_config("cpu", overrides="model.layers=2"), chapter_config("cpu", seed=3)):
        assert nudged_configs(cfg, "cpu") == {} and nudged_spread(cfg, "cpu") is None
    assert nudged_configs(chapter_config("smoke"), "smoke") == {}  # the smoke scale measures none
