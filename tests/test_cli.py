import pytest

import matcomp.runs.shipped
from matcomp.main import main


def test_train_prints_where_the_run_is_and_ship_refuses_a_bad_budget_by_name(store, tmp_path, monkeypatch, capsys):
    run = ["--preset", "smoke", "--set", "train.steps=120", "--set", "name=clismoke"]
    main(["train", *run, "--quiet"])
    out = capsys.readouterr().out
    assert f"stored in {store}/clismoke-" in out
    assert "final step 120: L " in out and "plateau L_mask" in out
    main(["runs"])
    listing = capsys.readouterr().out
    assert "clismoke-" in listing and "[finished] 120/120 steps" in listing
    started = store / "started-0123456789"
    started.mkdir()
    (started / "config.json").write_bytes((next(store.glob("clismoke-*")) / "config.json").read_bytes())
    main(["runs"])
    assert "started-0123456789 [started] no checkpoint yet" in capsys.readouterr().out
    monkeypatch.setattr(matcomp.runs.shipped, "REFERENCE_ROOT", tmp_path / "reference")
    with pytest.raises(SystemExit, match="leaves room for 0 checkpoints.*raise --max-mb"):
        main(["ship", *run, "--max-mb", "0.01"])
    with pytest.raises(SystemExit, match=r"steps \[7\] have no checkpoint"):
        main(["ship", *run, "--steps", "0", "7"])
    assert not (tmp_path / "reference").exists() or not any((tmp_path / "reference").iterdir())
    main(["ship", *run, "--steps", "0", "120"])
    assert "2 checkpoints" in capsys.readouterr().out
    main(["ship", *run, "--steps"])  # a shipped run narrowed to its metrics alone
    assert "to 0 checkpoints" in capsys.readouterr().out
    with pytest.raises(SystemExit, match=r"steps \[120\] are not shipped"):
        main(["ship", *run, "--steps", "120"])


def test_bad_override_names_the_field():
    with pytest.raises(SystemExit, match="train.lr must be in"):
        main(["train", "--preset", "smoke", "--set", "train.lr=-1"])
    with pytest.raises(SystemExit, match="FIELD=VALUE"):
        main(["train", "--preset", "smoke", "--set", "train.lr"])
    with pytest.raises(SystemExit, match="unknown config key 'train.epochs'"):
        main(["train", "--preset", "smoke", "--set", "train.epochs=3"])


def test_bench_prints_the_speedup(capsys):
    main(["bench", "--preset", "smoke", "--steps", "2", "--warmup", "1"])
    out = capsys.readouterr().out
    assert "machine:" in out and "| smoke (fp32" in out and "×** |" in out
    with pytest.raises(SystemExit, match="model.arch 'gpt' is not timed here"):
        main(["bench", "--preset", "smoke_gpt"])


def test_presets_lists_all(capsys):
    main(["presets"])
    out = capsys.readouterr().out
    assert all(name in out for name in ("smoke", "cpu", "paper", "paper12", "cpu_gpt", "paper_gpt"))
