"""Bad input, typed as a user types it: every case stops with a short message naming the problem
and leaves nothing sealed or lost on disk, or works; no run is called finished that is not whole."""

import json
import os
import re
import subprocess
import time

import pytest
import torch

import matcomp.runs.training
from matcomp.book.chapter import chapter_config, checked_parameters, model_preset
from matcomp.cli import main
from matcomp.data import sample_batch
from matcomp.presets import preset
from matcomp.runs.folder import RunFolder
from matcomp.runs.run import Run, summarize
from matcomp.runs.store import RunError, get_or_train
from matcomp.seeding import analysis_generator

SHORT = ["--preset", "smoke", "--set", "train.steps=40", "--set", "train.checkpoint_every=10"]


def refused(argv: list[str], capsys, code: int = 1) -> str:
    """Run the command line; it must exit with ``code`` and a message of at most two lines, which is returned."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    message = stop.value.code if isinstance(stop.value.code, str) else capsys.readouterr().err
    exit_code = 1 if isinstance(stop.value.code, str) else stop.value.code
    assert exit_code == code, message
    assert 1 <= len(message.strip().splitlines()) <= 2 and "Traceback" not in message, message
    return message


def nothing_in(store) -> bool:
    return not store.exists() or not any(p for p in store.iterdir() if not p.name.startswith("."))


def test_a_gap_in_the_table_is_never_sealed(store, monkeypatch, capsys):
    real, calls = matcomp.runs.training.sample_batch, {"n": 0}

    def crash_at_step_27(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 27 + 2:  # 27 training batches plus the evals
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(matcomp.runs.training, "sample_batch", crash_at_step_27)
    assert "resumes exactly from its last checkpoint" in refused(["train", *SHORT, "--quiet"], capsys, code=130)
    folder = RunFolder(next(store.glob("smoke-*")))
    assert folder.read_resume()["step"] == 20
    folder.write_metrics(folder.read_metrics().head(5))  # the table cut back behind the resume state
    monkeypatch.setattr(matcomp.runs.training, "sample_batch", real)
    with pytest.warns(UserWarning, match="does not hold every step from 1 to 20: steps 6-20 are missing"):
        main(["train", *SHORT, "--quiet"])
    assert "final step 40" in capsys.readouterr().out
    assert list(folder.read_metrics().step) == list(range(1, 41))  # trained again, whole
    broken = [p for p in store.iterdir() if ".broken-" in p.name]
    assert len(broken) == 1 and len(RunFolder(broken[0]).read_metrics()) == 5  # kept, not sealed


def test_a_cut_table_in_a_finished_folder_is_not_called_finished(store, capsys):
    main(["train", *SHORT, "--quiet"])
    folder = RunFolder(next(store.glob("smoke-*")))
    folder.write_metrics(folder.read_metrics().head(30))
    assert "[damaged: metrics.parquet is missing or has the wrong size]" in summarize(folder.path)


def test_a_diverged_run_is_moved_aside_not_sealed(micro, store, monkeypatch):
    real = matcomp.runs.training.train_step

    def nan_from_step_12(model, optimizer, cfg, generator, device, calls=[0]):
        calls[0] += 1
        out = real(model, optimizer, cfg, generator, device)
        return out * float("nan") if calls[0] >= 12 else out

    monkeypatch.setattr(matcomp.runs.training, "train_step", nan_from_step_12)
    with pytest.raises(RunError, match="L is not finite from step 12 on .*the run diverged.*moved to"):
        get_or_train(micro, progress=False)
    broken = [p for p in store.iterdir() if ".broken-" in p.name]
    assert len(broken) == 1 and not (broken[0] / "complete.json").exists()
    assert RunFolder(broken[0]).read_metrics().step.max() == 15  # stopped at the first checkpoint after it


@pytest.mark.parametrize("assignment, message", [
    ("data.p_mask=0", "data.p_mask must be in (0, 1): 0 leaves no entry missing"),
    ("data.p_mask=1", "data.p_mask must be in (0, 1)"),
    ("data.scale=NaN", "data.scale must be a finite number; got nan"),
    ("data.scale=Infinity", "data.scale must be a finite number; got inf"),
    ("train.lr=-1", "train.lr must be in (0, 1]"),
    ("model.heads=0", "model.heads must be >= 1"),
])
def test_meaningless_configs_are_refused_naming_the_range(assignment, message, store, capsys):
    assert message in refused(["train", "--preset", "smoke", "--set", assignment], capsys)
    assert nothing_in(store)


def test_a_short_run_says_it_has_no_plateau_and_is_not_shipped(store, capsys):
    main(["train", "--preset", "smoke", "--set", "train.steps=60", "--set", "train.checkpoint_every=20", "--quiet"])
    assert "no drop to read: too short to have a plateau: the table ends at step 60" in capsys.readouterr().out
    message = refused(["ship", "--preset", "smoke", "--set", "train.steps=60", "--set", "train.checkpoint_every=20"],
                      capsys)
    assert "cannot be shipped: too short to have a plateau" in message


def test_ship_of_a_run_not_trained_trains_nothing(store, capsys):
    message = refused(["ship", "--preset", "smoke", "--set", "train.steps=61"], capsys)
    assert "is not finished" in message and "train it first: python -m matcomp train --preset smoke" in message
    assert nothing_in(store)


@pytest.mark.parametrize("argv, code, message", [
    (["train", "--preset", "smoke", "--threads", "0"], 2, "argument --threads: must be an integer >= 1 and <= "),
    (["train", "--preset", "smoke", "--threads", "two"], 2, "argument --threads: must be an integer >= 1"),
    (["train", "--preset", "smoke", "--device", "gpu0"], 1, "device must be auto, cpu, cuda or cuda:N; got 'gpu0'"),
    (["bench", "--preset", "smoke", "--steps", "0"], 2, "argument --steps: must be an integer >= 1"),
    (["ship", "--preset", "smoke", "--max-mb", "-1"], 2, "argument --max-mb: must be a number > 0; got '-1'"),
    (["ship", "--preset", "smoke", "--max-mb", "nan"], 2, "argument --max-mb: must be a number > 0"),
    (["prepare", "--threads-per-run", "0"], 2, "argument --threads-per-run: must be an integer >= 1"),
    (["plan", "--chapter", "nope"], 1, "chapters must be among"),
])
def test_flags_are_checked_before_any_work(argv, code, message, store, capsys):
    assert message in refused(argv, capsys, code)
    assert nothing_in(store)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine with CUDA has the device")
def test_cuda_where_there_is_none_is_refused(store, capsys):
    assert "device 'cuda' is not here: this machine has 0 CUDA device(s)" in refused(
        ["train", "--preset", "smoke", "--device", "cuda"], capsys)


def test_no_training_with_a_missing_run_is_one_line(store, monkeypatch, capsys):
    monkeypatch.setenv("MATCOMP_NO_TRAINING", "1")
    message = refused(["train", "--preset", "smoke", "--set", "train.seed=5", "--quiet"], capsys)
    assert "is not in the store" in message and "$MATCOMP_NO_TRAINING is set" in message
    assert nothing_in(store)


def test_a_chapter_that_needs_no_run_plans_none(capsys):
    main(["plan", "--preset", "cpu", "--chapter", "task"])
    assert capsys.readouterr().out.strip() == "no runs: task trains nothing at preset cpu"


def test_train_reads_the_chapters_variables(store, monkeypatch, capsys):
    monkeypatch.setenv("MATCOMP_PRESET", "smoke")
    monkeypatch.setenv("MATCOMP_SEED", "3")
    monkeypatch.setenv("MATCOMP_SET", "train.steps=120")
    main(["train", "--quiet"])
    assert "final step 120" in capsys.readouterr().out
    folder = RunFolder(next(store.glob("smoke-*")))
    assert folder.read_config().train.seed == 3
    main(["train", "--quiet", "--set", "train.seed=4"])  # a flag overrides the variables
    assert sorted(RunFolder(p).read_config().train.seed for p in store.glob("smoke-*")) == [3, 4]


@pytest.mark.parametrize("variable, value, message", [
    ("MATCOMP_PRESET", "nope", "$MATCOMP_PRESET must be one of"),
    ("MATCOMP_SEED", "x", "$MATCOMP_SEED: train.seed must be an integer; got 'x'"),
    ("MATCOMP_SEED", "-2", "$MATCOMP_SEED: train.seed must be in [0, "),
    ("MATCOMP_SET", "train.lr=abc", "$MATCOMP_SET: train.lr must be a finite number; got 'abc'"),
    ("MATCOMP_SET", "train.lr", "$MATCOMP_SET: expected comma-separated FIELD=VALUE pairs"),
])
def test_a_bad_variable_is_named(variable, value, message, store, monkeypatch, capsys):
    monkeypatch.setenv(variable, value)
    assert message in refused(["train", "--quiet"], capsys)
    assert message in refused(["plan"], capsys)
    with pytest.raises(ValueError, match=re.escape(message)):
        chapter_config()
    assert nothing_in(store)


@pytest.mark.parametrize("model", ["smoke_gpt", "nope"])
def test_a_chapter_refuses_an_unsuitable_model_by_its_parameter_name(model, store):
    with pytest.raises(ValueError, match=f"model: the one-model chapters analyse a trained BERT.*got '{model}'"):
        model_preset("smoke", model)
    assert model_preset("smoke", "cpu") == "cpu" and nothing_in(store)


@pytest.mark.parametrize("argv, code, message", [
    (["train", *SHORT, "--set", f"train.seed={2**63 - 1}"], 1, "train.seed must be in [0, 9223372036854775]"),
    (["train", *SHORT, "--device", "cpu:7"], 1, "device must be auto, cpu, cuda or cuda:N; got 'cpu:7'"),
    (["train", *SHORT, "--set", "train.lr=1e-3", "--set", "train.lr=2e-3"], 1,
     "--set gives train.lr 2 times (1e-3, 2e-3); give each once"),
    (["train", *SHORT, "--threads", "100000"], 2, "argument --threads: must be an integer >= 1 and <= "),
    (["prepare", "--threads-per-run", "100000"], 2, "argument --threads-per-run: must be an integer >= 1 and <= "),
], ids=["seed beyond the generators", "a CPU with an index", "one field set twice", "threads beyond the cores",
        "threads per run beyond the cores"])
def test_round_two_inputs_are_refused_by_name_before_any_work(argv, code, message, store, capsys):
    assert message in refused(argv, capsys, code)
    assert nothing_in(store)


@pytest.mark.parametrize("damage", ["checkpoint deleted", "checkpoint bytes flipped", "config edited", "table cut"])
def test_a_run_changed_after_it_finished_is_damaged_to_runs_and_refused_by_run(damage, store, capsys):
    """One meaning of finished: ``runs`` (summarize), ``Run`` and ``open_run`` all check every byte."""
    main(["train", *SHORT, "--quiet"])
    folder = RunFolder(next(store.glob("smoke-*")))
    checkpoint = folder.checkpoint_path(20)
    if damage == "checkpoint deleted":
        checkpoint.unlink()
    elif damage == "checkpoint bytes flipped":
        data = bytearray(checkpoint.read_bytes())
        data[-100:] = bytes(b ^ 0xFF for b in data[-100:])  # the size kept
        checkpoint.write_bytes(bytes(data))
    elif damage == "config edited":
        config = json.loads(folder.config_path.read_text())
        config["train"]["lr"] = 0.5
        folder.config_path.write_text(json.dumps(config))
    else:
        folder.write_metrics(folder.read_metrics().head(30))
    assert "[damaged: " in summarize(folder.path)
    with pytest.raises(ValueError, match="missing|changed since it finished|does not hold every step"):
        run = Run(folder.path)
        run.metrics
        run.checkpoint(20)


def test_a_store_that_is_a_file_is_named_by_every_command_and_the_library(tmp_path, monkeypatch, capsys, micro):
    file = tmp_path / "store.txt"
    file.write_text("not a folder")
    monkeypatch.setenv("MATCOMP_RUNS", str(file))
    for argv in (["train", *SHORT], ["runs"], ["plan", "--preset", "smoke"]):
        assert f"$MATCOMP_RUNS is {file}, a file" in refused(argv, capsys)
    with pytest.raises(ValueError, match=f"root is {file}, which is .*a file"):
        get_or_train(micro, progress=False, root=file)
    assert "--out" in refused(["sweep", "book/sudden_drop.ipynb", "--out", str(file), "--param", "seed", "0",
                               "--fixed", "preset=smoke"], capsys) and file.read_text() == "not a folder"


@pytest.fixture
def immutable(tmp_path):
    """A folder nothing can be written into, not even by root (``chattr +i``; else, for a user, mode 555)."""
    folder = tmp_path / "immutable"
    folder.mkdir()
    made = subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode == 0
    if not made:
        if os.geteuid() == 0:
            pytest.skip("neither chattr +i nor file modes can stop root writing here")
        folder.chmod(0o555)
    yield folder
    if made:
        subprocess.run(["chattr", "-i", str(folder)], check=True)
    folder.chmod(0o755)


def test_a_store_that_cannot_be_written_is_named_before_any_work(immutable, monkeypatch, capsys):
    monkeypatch.setenv("MATCOMP_RUNS", str(immutable))
    assert f"$MATCOMP_RUNS {immutable} cannot be written" in refused(["train", *SHORT], capsys)
    started = time.perf_counter()
    assert f"$MATCOMP_RUNS {immutable} cannot be written" in refused(["prepare", "--preset", "smoke"], capsys)
    assert time.perf_counter() - started < 5  # before Ray starts (12.6 s before)


def test_prepare_refuses_gpus_and_clusters_that_are_not_there_before_waiting(store, capsys):
    if torch.cuda.device_count() == 0:
        assert "this machine has 0 CUDA device(s)" in refused(["prepare", "--preset", "smoke", "--gpus-per-run", "1"],
                                                               capsys)
    assert "no Ray cluster answers at '127.0.0.1:1'" in refused(["prepare", "--preset", "smoke", "--address",
                                                                 "127.0.0.1:1"], capsys)


@pytest.mark.parametrize("param, message", [
    (["sed", "0", "1"], "sudden_drop.ipynb has no parameter 'sed'; its parameters: preset, model, seed"),
    (["overrides", "model.layers=1", "model.layers=abc"], "model.layers must be an integer; got 'abc'"),
], ids=["a misspelt parameter", "a bad point after a good one"])
def test_a_sweep_checks_every_point_before_any_runs(param, message, store, tmp_path, capsys):
    out = tmp_path / "sweep"
    assert message in refused(["sweep", "book/sudden_drop.ipynb", "--out", str(out), "--param", *param,
                               "--fixed", "preset=smoke", "--quiet"], capsys)
    assert not out.exists() and nothing_in(store)


def test_a_relative_store_is_resolved_once_from_where_the_user_stands(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MATCOMP_RUNS", "relstore")
    main(["runs"])
    assert os.environ["MATCOMP_RUNS"] == str(tmp_path / "relstore")  # what a sweep's points, in book/, inherit


def test_the_library_names_an_argument_of_the_wrong_type(micro, tmp_path):
    with pytest.raises(TypeError, match="preset: overrides must be a dict"):
        preset("smoke", "train.lr=1e-3")
    for cfg in ("smoke", None):
        with pytest.raises(TypeError, match="get_or_train: cfg must be a RunConfig"):
            get_or_train(cfg)
    run = get_or_train(micro, progress=False, root=tmp_path)
    with pytest.raises(TypeError, match=r"checkpoint: step must be an integer, one of \[0, 10, 15, 20, 30, 40\]"):
        run.checkpoint("3")
    with pytest.raises(ValueError, match="sample_batch: batch must be an integer >= 1"):
        sample_batch(micro.data, -5, analysis_generator(0))


def test_a_chapter_refuses_a_parameter_it_does_not_have_an_empty_count_and_a_run_without_a_plateau():
    namespace = {"preset": "smoke", "seed": None, "In": [], "get_ipython": print, "_": None}
    checked_parameters(namespace, "sudden_drop")  # what a chapter holds before its setup: no complaint
    with pytest.raises(ValueError, match="the sudden_drop chapter has no parameter 'presett'"):
        checked_parameters({**namespace, "presett": "smoke"}, "sudden_drop")
    with pytest.raises(ValueError, match="seeds = 0 in the sudden_drop chapter: give a positive count"):
        checked_parameters({**namespace, "seeds": 0}, "sudden_drop")
    with pytest.raises(ValueError, match=r"train.steps must be > 100 for a chapter: .* got 50"):
        chapter_config("smoke", overrides="train.steps=50")


@pytest.mark.slow
def test_papermill_with_a_misspelt_parameter_stops_the_chapter_by_name(tmp_path):
    import papermill

    with pytest.raises(papermill.PapermillExecutionError, match="no parameter 'presett'"):
        papermill.execute_notebook("book/task.ipynb", str(tmp_path / "out.ipynb"), parameters={"presett": "smoke"},
                                   cwd="book", progress_bar=False)


@pytest.mark.parametrize("argv, message", [
    (["--set", "train.batch=100000000"], "GiB of memory; this cpu has"),
    (["--set", "train.steps=100000000"], "GiB of disk"),
    (["--set", "train.steps=100000000"], "100,000,000 steps would take about"),
], ids=["memory", "disk", "time"])
def test_a_run_beyond_the_machine_is_refused_with_its_numbers_before_it_starts(argv, message, store, capsys):
    said = refused(["train", "--preset", "smoke", *argv, "--quiet"], capsys)
    assert message in said and "--force" in said
    assert nothing_in(store)


def test_bench_refuses_a_timing_of_hours(capsys):
    assert "must be an integer >= 1 and <= 10000" in refused(["bench", "--preset", "smoke", "--steps", "99999999"],
                                                             capsys, code=2)
