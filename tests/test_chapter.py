import numpy as np
import pandas as pd
import pytest

from matcomp.chapter import chapter_config, parse_overrides, phases
from matcomp.files import RunFolder
from matcomp.presets import preset
from matcomp.run import Run


def test_parameters_resolve_from_arguments_then_environment_then_default(monkeypatch):
    for name in ("MATCOMP_PRESET", "MATCOMP_SEED", "MATCOMP_SET"):
        monkeypatch.delenv(name, raising=False)
    assert chapter_config() == preset("cpu")
    monkeypatch.setenv("MATCOMP_PRESET", "smoke")
    monkeypatch.setenv("MATCOMP_SEED", "4")
    monkeypatch.setenv("MATCOMP_SET", "train.lr=2e-3,data.p_mask=0.2")
    cfg = chapter_config()
    assert (cfg.name, cfg.train.seed, cfg.train.lr, cfg.data.p_mask) == ("smoke", 4, 2e-3, 0.2)
    cfg = chapter_config("cpu", seed=3, overrides="train.lr=5e-4")
    assert (cfg.name, cfg.train.seed, cfg.train.lr, cfg.data.p_mask) == ("cpu", 3, 5e-4, 0.2)


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match="FIELD=VALUE"):
        parse_overrides("train.lr")
    with pytest.raises(ValueError, match="preset must be one of"):
        chapter_config("huge")
    with pytest.raises(ValueError, match="unknown config key 'train.speed'"):
        chapter_config("smoke", overrides="train.speed=2")


def fake_run(tmp_path, l_mask: np.ndarray, steps: list[int]) -> Run:
    folder = RunFolder(tmp_path / "run")
    folder.write_config(preset("smoke").override({"train.steps": len(l_mask)}))
    step = np.arange(1, len(l_mask) + 1)
    folder.write_metrics(pd.DataFrame({"step": step, "L": l_mask, "L_obs": 1e-4, "L_mask": l_mask,
                                       "mask_value": 0.0, "time_s": np.nan}))
    for s in steps:
        folder.write_checkpoint(s, {})
    folder.write_complete({"files": folder.sizes()})
    return Run(folder.path)


def test_phases_follow_the_drop(tmp_path):
    l_mask = np.where(np.arange(1, 4001) < 2000, 0.11, 0.01)
    run = fake_run(tmp_path, l_mask, [0, 500, 1000, 1500, 1900, 2100, 3000, 4000])
    p = phases(run)
    assert p.dropped and p.plateau == (500, 1000, 1500, 1900) and p.post == 4000
    assert p.pre == 1000  # nearest half the drop step (~1950)
    assert "step 1950" in p.note or "at step" in p.note


def test_phases_without_a_drop_say_so(tmp_path):
    run = fake_run(tmp_path, np.full(600, 0.11), [0, 200, 400, 600])
    p = phases(run)
    assert not p.dropped and p.plateau == (200, 400, 600) and p.post == 600
    assert "no drop" in p.note
