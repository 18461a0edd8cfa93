import numpy as np
import pandas as pd
import pytest

from matcomp.analysis.phases import phases
from matcomp.analysis.shortening import drop_comparison, drop_summary, shortening_defaults
from matcomp.book.chapter import chapter_config
from matcomp.config import parse_overrides
from matcomp.presets import preset
from matcomp.runs.folder import RunFolder
from matcomp.runs.run import Run


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
    gpt = chapter_config(variant="gpt")  # the GPT at the scale of $MATCOMP_PRESET
    assert (gpt.name, gpt.model.arch, gpt.train.seed) == ("smoke_gpt", "gpt", 4)
    assert chapter_config("paper_gpt", variant="gpt").name == "paper_gpt"


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
    drop = run.drop.half_step  # ~1950: the paper's 4,000 of 15,000 is 0.27 of it, ~520
    assert p.pre == 500 and p.copy_steps == (500, 1900)  # 0.07, 0.27, 0.93 of the drop, nearest checkpoints
    assert f"at step {drop}" in " ".join(p.note.split()) and "fractions" in p.note
    paper = phases(run, paper_steps=True)  # the paper's own steps 4,000 and 1,000 / 4,000 / 14,000
    assert paper.pre == 4000 and paper.copy_steps == (1000, 4000)
    assert "the paper's steps" in " ".join(paper.note.split())


def test_phases_without_a_drop_say_so(tmp_path):
    run = fake_run(tmp_path, np.full(600, 0.11), [0, 200, 400, 600])
    p = phases(run)
    assert not p.dropped and p.plateau == (200, 400, 600) and p.post == 600
    assert "no drop" in p.note


def test_shortening_defaults_scale_with_the_preset():
    cpu = shortening_defaults(preset("cpu"))
    assert cpu["bias, long"] == {"train.attention_bias": 2.0, "train.attention_bias_steps": 4000, "train.steps": 8000}
    assert cpu["bias, short"]["train.attention_bias_steps"] == 2000
    assert cpu["lr × 2"] == {"train.lr": 0.002, "train.steps": 6000}
    smoke = preset("smoke").override(shortening_defaults(preset("smoke"))["bias, short"])
    assert (smoke.train.attention_bias_steps, smoke.train.steps) == (30, 200)  # never shorter than the detector needs


def test_drop_comparison_keeps_censored_seeds_out_of_the_spread():
    plain = pd.DataFrame({"drop step": pd.array([5000, 6500, 11000], dtype="Int64")}, index=[0, 1, 2])
    changed = pd.DataFrame({"drop step": pd.array([3000, 3500, None], dtype="Int64")}, index=[0, 1, 2])
    table = drop_comparison(plain, changed, budget=8000)
    assert table["change"].tolist()[:2] == [-2000, -3000] and pd.isna(table.loc[2, "change"])
    assert table["plain dropped by budget"].tolist() == [True, True, False]
    summary = drop_summary(table, budget=8000)
    assert summary.loc["plain", "dropped within it"] == "2/3" and summary.loc["changed", "dropped within it"] == "2/3"
    assert summary.loc["change", "mean drop step"] == -2500 and summary.loc["plain", "max"] == 6500
    assert summary.loc["change", "std"] == pytest.approx(np.std([-2000, -3000], ddof=1))
