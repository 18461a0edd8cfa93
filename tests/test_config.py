import pytest

from matcomp.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from matcomp.presets import PRESETS, preset_config


@pytest.mark.parametrize("make, field", [
    (lambda: DataConfig(rank=8), "data.rank"),
    (lambda: DataConfig(rank=0), "data.rank"),
    (lambda: DataConfig(n_rows=3, n_cols=5, rank=4), "data.rank"),
    (lambda: DataConfig(p_mask=1.0), "data.p_mask"),
    (lambda: DataConfig(p_mask=-0.1), "data.p_mask"),
    (lambda: DataConfig(n_rows=0), "data.n_rows"),
    (lambda: DataConfig(distribution="cauchy"), "data.distribution"),
    (lambda: DataConfig(distribution="gaussian"), "data.clamp"),
    (lambda: DataConfig(scale=3.0), r"data.rank \* data.scale\*\*2"),
    (lambda: DataConfig(scale=0.0), "data.scale"),
    (lambda: DataConfig(rank=2.5), "data.rank"),
    (lambda: ModelConfig(hidden=100, heads=8), "model.hidden"),
    (lambda: ModelConfig(layers=0), "model.layers"),
    (lambda: ModelConfig(heads=0), "model.heads"),
    (lambda: ModelConfig(intermediate=-1), "model.intermediate"),
    (lambda: TrainConfig(steps=0), "train.steps"),
    (lambda: TrainConfig(batch=0), "train.batch"),
    (lambda: TrainConfig(lr=0.0), "train.lr"),
    (lambda: TrainConfig(lr=-1e-4), "train.lr"),
    (lambda: TrainConfig(eval_every=0), "train.eval_every"),
    (lambda: TrainConfig(checkpoint_every=0), "train.checkpoint_every"),
    (lambda: TrainConfig(checkpoint_steps=(-5,)), "train.checkpoint_steps"),
    (lambda: TrainConfig(precision="fp16"), "train.precision"),
    (lambda: TrainConfig(attention="flash"), "train.attention"),
    (lambda: TrainConfig(steps=True), "train.steps"),
    (lambda: TrainConfig(position_init="sinusoid"), "train.position_init"),
    (lambda: TrainConfig(attention_bias=-1.0), "train.attention_bias"),
    (lambda: TrainConfig(attention_bias=1.0), "train.attention_bias_steps"),
    (lambda: TrainConfig(component="layernorm", init_from="cpu-f603ff8bc5"), "train.component"),
    (lambda: TrainConfig(component="mlp"), "train.init_from"),
    (lambda: TrainConfig(init_from="cpu-f603ff8bc5"), "train.init_from"),
    (lambda: RunConfig(data=DataConfig(n_rows=23, n_cols=23), model=ModelConfig(max_positions=512)),
     r"data.n_rows \* data.n_cols"),
    (lambda: RunConfig(name="a b"), "name"),
])
def test_validation_names_the_field(make, field):
    with pytest.raises(ValueError, match=field):
        make()


def test_derived_values():
    cfg = RunConfig()
    assert cfg.model.intermediate_size == 3072 and cfg.model.head_dim == 96
    assert ModelConfig(hidden=64, intermediate=100).intermediate_size == 100
    assert cfg.data.seq_len == 49


def test_json_round_trip_and_hash():
    for cfg in PRESETS.values():
        back = RunConfig.from_json(cfg.to_json())
        assert back == cfg and back.hash == cfg.hash
    assert len({c.hash for c in PRESETS.values()}) == len(PRESETS)
    renamed = preset_config("cpu", {"name": "other"})
    assert renamed.hash == preset_config("cpu").hash and renamed.run_id != preset_config("cpu").run_id


def test_int_and_float_hash_alike():
    assert TrainConfig(lr=1).lr == 1.0
    assert RunConfig(train=TrainConfig(lr=1)).hash == RunConfig(train=TrainConfig(lr=1.0)).hash


def test_unknown_keys_are_rejected():
    d = RunConfig().to_dict()
    with pytest.raises(ValueError, match="unknown config keys.*extra"):
        RunConfig.from_dict({**d, "extra": 1})
    d["train"]["epochs"] = 5
    with pytest.raises(ValueError, match="train.epochs"):
        RunConfig.from_dict(d)
    with pytest.raises(ValueError, match="train.epoch"):
        RunConfig().override({"train.epoch": "3"})


def test_override_parses_values():
    cfg = preset_config("paper", {"train.lr": "3e-4", "model.layers": "6", "train.checkpoint_steps": "[5, 7]"})
    assert cfg.train.lr == 3e-4 and cfg.model.layers == 6 and cfg.train.checkpoint_steps == (5, 7)
    with pytest.raises(ValueError, match="train.lr"):
        preset_config("paper", {"train.lr": "fast"})
    with pytest.raises(ValueError, match="preset must be one of"):
        preset_config("gpu")


def test_checkpoint_schedule():
    tc = TrainConfig(steps=20000, checkpoint_every=5000, checkpoint_steps=(4000, 14000, 50000))
    assert tc.checkpoint_schedule == (0, 4000, 5000, 10000, 14000, 15000, 20000)
    assert TrainConfig(steps=7, checkpoint_every=5, checkpoint_steps=()).checkpoint_schedule == (0, 5, 7)


def test_paper_presets_are_the_papers_settings():
    paper, paper12 = preset_config("paper"), preset_config("paper12")
    m = paper.model
    assert (m.layers, m.heads, m.hidden, m.intermediate_size) == (4, 8, 768, 3072)
    assert (paper.train.lr, paper.train.batch, paper.train.steps) == (1e-4, 256, 50000)
    assert (paper.data.n_rows, paper.data.n_cols, paper.data.rank, paper.data.p_mask) == (7, 7, 2, 0.3)
    assert (paper12.model.layers, paper12.model.heads, paper12.train.lr) == (12, 12, 5e-5)
    assert {4000, 14000, 16000, 20000, 50000} <= set(paper.train.checkpoint_schedule)
    assert all(b - a <= 1000 for a, b in zip(paper.train.checkpoint_schedule, paper.train.checkpoint_schedule[1:]))


def test_later_fields_at_their_defaults_leave_the_hash_alone():
    """Runs stored before the training-dynamics fields existed keep their ids."""
    import hashlib
    import json

    cfg = preset_config("cpu")
    d = cfg.to_dict()
    d.pop("name")
    for key in ("position_init", "attention_bias", "attention_bias_steps", "attention_bias_schedule", "attention_scale",
                "attention_scale_from", "attention_diagonal", "component", "init_from", "stop_after_drop",
                "init_nudge"):
        d["train"].pop(key)
    d["data"].pop("sizes")
    d["model"].pop("arch")
    assert cfg.hash == hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:10]
    changed = {preset_config("cpu", {"train.position_init": "grid"}).hash,
               preset_config("cpu", {"train.attention_bias": 1, "train.attention_bias_steps": 10}).hash,
               preset_config("cpu", {"train.component": "mlp", "train.init_from": cfg.run_id}).hash,
               preset_config("cpu", {"data.sizes": [3, 4]}).hash,
               preset_config("cpu", {"train.stop_after_drop": 2000}).hash,
               preset_config("cpu", {"model.arch": "gpt", "model.max_positions": 32}).hash,
               preset_config("cpu", {"train.attention_bias": 1, "train.attention_bias_schedule": "constant"}).hash,
               preset_config("cpu", {"train.attention_scale": 10, "train.attention_scale_from": 500}).hash,
               preset_config("cpu", {"train.attention_bias": 1, "train.attention_bias_steps": 10,
                              "train.attention_diagonal": False}).hash}
    assert len(changed) == 9 and cfg.hash not in changed
