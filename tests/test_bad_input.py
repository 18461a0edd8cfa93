"""Bad input, typed as a user types it: every case stops with a short message naming the problem
and leaves nothing sealed or lost on disk, or works; no run is called finished that is not whole."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import matcomp.runs.training
from matcomp.book.chapter import chapter_config, model_preset
from matcomp.book.chapters import chapter_spec
from matcomp.data import sample_batch
from matcomp.main import main
from matcomp.presets import preset_config
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
    with pytest.raises(ValueError, match=f"one_model: the one-model chapters analyse a trained BERT.*got '{model}'"):
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
    (["sed", "0", "1"], "sudden_drop.ipynb has no parameter 'sed'; its parameters: preset, seed, overrides, one_model"),
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
    with pytest.raises(TypeError, match="preset_config: overrides must be a dict"):
        preset_config("smoke", "train.lr=1e-3")
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
    chapter_spec("sudden_drop").check(namespace)  # what a chapter holds before its setup: no complaint
    with pytest.raises(ValueError, match="the sudden_drop chapter has no parameter 'presett'"):
        chapter_spec("sudden_drop").check({**namespace, "presett": "smoke"})
    with pytest.raises(ValueError, match="the sudden_drop chapter's parameter seeds must be an integer >= 1, or "
                                         "None for the scale's; got 0"):
        chapter_spec("sudden_drop").check({**namespace, "seeds": 0})
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


# round three: no override that swaps a section, no damaged seal that blocks the store, every parameter by name

@pytest.mark.parametrize("assignment, message", [
    ('train={"lr": 1}', "'train' is a section of the config, not a field: set its fields one by one"),
    ("train.checkpoint_steps=50", "train.checkpoint_steps must be a list of integers in brackets, e.g. [1, 2]; got 50"),
    ("data.sizes=4", "data.sizes must be a list of integers in brackets, e.g. [1, 2]; got 4"),
], ids=["a section", "a scalar checkpoint list", "a scalar size list"])
def test_an_override_sets_fields_never_a_section_and_a_list_field_takes_a_list(assignment, message, store, capsys):
    assert message in refused(["train", "--preset", "smoke", "--set", assignment, "--quiet"], capsys)
    with pytest.raises(ValueError, match="'train' is a section of the config, not a field"):
        preset_config("smoke", {"train": {"lr": 1}})
    assert nothing_in(store)


def test_a_seal_that_is_not_json_is_damage_named_listed_and_moved_aside(store, capsys):
    main(SHORT_TRAIN := ["train", *SHORT])
    path = next(p for p in store.glob("smoke-*") if p.is_dir())
    (path / "complete.json").write_text("{not json")
    main(["runs"])
    assert f"[damaged: {path / 'complete.json'} is damaged: not valid JSON" in capsys.readouterr().out
    with pytest.raises(ValueError, match="complete.json is damaged: not valid JSON"):
        Run(path)
    main(SHORT_TRAIN)  # trains again, the damaged folder kept aside
    assert (path / "complete.json").exists() and len(list(store.glob(f"{path.name}.broken-*"))) == 1


@pytest.mark.parametrize("chapter, name, value, message", [
    ("embeddings", "seeds", -2, "must be an integer >= 1, or None for the scale's; got -2"),
    ("embeddings", "seeds", [-1, 2], "must be an integer >= 1, or None for the scale's; got [-1, 2]"),
    ("task", "moment_samples", -5, "must be an integer >= 1; got -5"),
    ("nuclear_norm", "samples", 0, "must be an integer >= 1, or None for the scale's; got 0"),
    ("ood", "samples", 0, "must be an integer >= 1, or None for the scale's; got 0"),
    ("observed_entries", "samples", None, "must be an integer >= 1; got None"),
    ("nuclear_norm", "p_masks", [0.1, 1.2], "must be a non-empty list of numbers in (0, 1)"),
    ("width_depth", "widths", 64, "must be a non-empty list of integers >= 1"),
    ("head_taxonomy", "mass", 1.5, "must be a number in (0, 1]; got 1.5"),
])
def test_every_chapter_parameter_is_checked_by_its_name_where_it_enters(chapter, name, value, message, store,
                                                                        tmp_path, capsys):
    from matcomp.book.build.sweep import notebook_parameters

    defaults = notebook_parameters(f"book/{chapter}.ipynb")
    chapter_spec(chapter).check(defaults)  # its own defaults pass
    with pytest.raises(ValueError, match=re.escape(f"the {chapter} chapter's parameter {name} {message}")):
        chapter_spec(chapter).check({**defaults, name: value})
    out = tmp_path / "sweep"
    said = refused(["sweep", f"book/{chapter}.ipynb", "--out", str(out), "--param", name, json.dumps(value),
                    "--fixed", "preset=smoke", "--quiet"], capsys)
    assert f"parameter {name} {message}" in said and not out.exists()


def test_every_parameter_of_every_chapter_has_a_rule_on_its_field_or_is_checked_with_the_config():
    import dataclasses

    from matcomp.book.build.sweep import notebook_parameters
    from matcomp.book.parameters import RULE

    config = {"seed", "overrides", "intervention"}
    for notebook in sorted(Path("book").glob("*.ipynb")):
        declared = dataclasses.fields(chapter_spec(notebook.stem).parameters)
        assert {f.name for f in declared if RULE not in f.metadata} <= config, notebook.name
        chapter_spec(notebook.stem).check(notebook_parameters(notebook))


@pytest.mark.parametrize("argv, message", [
    (["sweep", "README.md", "--out", "OUT", "--param", "seed", "0"], "README.md is not a Jupyter notebook"),
    (["sweep", "book/task.ipynb", "--out", "OUT", "--param", "seed", "0", "--param", "seed", "1"],
     "--param gives seed 2 times; give each parameter once"),
    (["sweep", "book/task.ipynb", "--out", "OUT", "--param", "seed", "0", "--fixed", "seed=1"],
     "seed is given both by --param and by --fixed; give it once"),
    (["train", "--preset", "smoke", "--limit-s", "0"], "argument --limit-s: must be a number > 0; got '0'"),
    (["remote", "--preset", "smoke", "--out", "OUT", "--checkpoint", "150"],
     f"checkpoint 150 is not one of {preset_config('smoke').run_id}'s checkpoints after step 0: [100, 200, 300]"),
    (["unpack", "OUT", "--run", "bogus"], "OUT is not a folder of packed files"),
], ids=["a file that is not a notebook", "a sweep parameter twice", "a parameter swept and fixed",
        "a limit of 0 s", "a checkpoint off the schedule", "no packed folder"])
def test_round_three_inputs_are_refused_by_name_before_any_work(argv, message, store, tmp_path, capsys):
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in argv]
    code = 2 if "--limit-s" in argv else 1
    assert message.replace("OUT", str(tmp_path / "out")) in refused(argv, capsys, code=code)
    assert nothing_in(store) and not (tmp_path / "out").exists()


def test_unpack_and_derive_name_a_folder_they_cannot_write_before_any_work(immutable, tmp_path, capsys):
    assert f"the store to install into {immutable} cannot be written" in refused(
        ["unpack", str(tmp_path), "--into", str(immutable)], capsys)
    from matcomp.runs.store import writable_store
    with pytest.raises(ValueError, match=f"the shipped tables' folder {immutable} cannot be written"):
        writable_store(immutable, "the shipped tables' folder")


def test_python_m_matcomp_help_ends_its_sentence(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "sweep a chapter with papermill; derive the shipped tables." in " ".join(capsys.readouterr().out.split())


def test_a_chapter_announces_training_on_the_console_and_refuses_it_past_the_minutes_set(store, monkeypatch,
                                                                                         capsys):
    import sys

    from matcomp.book.chapter import announce_training
    from matcomp.runs.store import locate, runs_root

    cfg = preset_config("smoke").override({"train.steps": 120})
    read, console_fd = os.pipe()

    class KernelStderr:  # what ipykernel puts in sys.stderr: its own console kept as a file descriptor
        _original_stdstream_copy = console_fd

        def write(self, text):
            return len(text)

        def flush(self):
            pass

    monkeypatch.setattr(sys, "stderr", KernelStderr())
    assert announce_training(locate(cfg, runs_root()), "smoke") is True
    os.close(console_fd)
    console = os.read(read, 10000).decode()
    assert console.startswith(f"Training run {cfg.run_id} (120 steps, about ") and "s a step timed here" in console
    assert console.strip() in capsys.readouterr().out  # the notebook's line, the same
    monkeypatch.setenv("MATCOMP_MAX_TRAIN_MIN", "0.003")  # 0.18 s: past the fastest step's 0.12 s, not the timed
    with pytest.raises(RunError, match=r"would train 120 steps here, about .* timed here\), beyond "
                                       r"\$MATCOMP_MAX_TRAIN_MIN = 0.003 minutes"):
        announce_training(locate(cfg, runs_root()), "smoke")
    monkeypatch.setenv("MATCOMP_MAX_TRAIN_MIN", "soon")
    with pytest.raises(ValueError, match=r"\$MATCOMP_MAX_TRAIN_MIN must be a number of minutes >= 0; got 'soon'"):
        announce_training(locate(cfg, runs_root()), "smoke")


# Round four: chapters, sweeps and the environment

@pytest.mark.parametrize("chapter, name, value, message", [
    ("sudden_drop", "preset", "", "must be one of"),
    ("probing", "one_model", "", "must be a trained BERT's preset, one of"),
    ("sizes_ranks", "steps", 50, "must be an integer > 100 (training steps: a run's plateau is read after step 100)"),
    ("ood", "gaussian_steps", 100, "must be an integer > 100"),
], ids=["an empty preset", "an empty model", "too few steps for a plateau", "too few Gaussian steps"])
def test_round_four_chapter_parameters_are_refused_in_the_first_cell_and_by_a_sweep(chapter, name, value, message,
                                                                                    store, tmp_path, capsys):
    from matcomp.book.build.sweep import notebook_parameters

    defaults = notebook_parameters(f"book/{chapter}.ipynb")
    with pytest.raises(ValueError, match=re.escape(f"the {chapter} chapter's parameter {name} {message}")):
        chapter_spec(chapter).check({**defaults, name: value})
    out = tmp_path / "sweep"
    said = refused(["sweep", f"book/{chapter}.ipynb", "--out", str(out), "--param", name, json.dumps(value),
                    "--quiet"], capsys)
    assert f"parameter {name} {message}" in said and not out.exists() and nothing_in(store)


@pytest.mark.parametrize("chapter, name", [("head_taxonomy", "samples"), ("probing", "test_matrices"),
                                           ("copying_phase", "ablation_samples")])
def test_a_sample_count_too_small_for_a_verdict_is_refused_where_it_enters(chapter, name, tmp_path, capsys):
    from matcomp.book.build.sweep import notebook_parameters
    from matcomp.book.judging.verdicts import MIN_SAMPLES

    defaults = notebook_parameters(f"book/{chapter}.ipynb")
    chapter_spec(chapter).check({**defaults, name: MIN_SAMPLES})  # the minimum carries a verdict
    with pytest.raises(ValueError, match=f"parameter {name} = 1 cannot carry its verdicts: the paper's claims are "
                                         f"judged on at least {MIN_SAMPLES} matrices"):
        chapter_spec(chapter).check({**defaults, name: 1})
    said = refused(["sweep", f"book/{chapter}.ipynb", "--out", str(tmp_path / "o"), "--param", name, "1"], capsys)
    assert "cannot carry its verdicts" in said


@pytest.mark.parametrize("variable, value, message", [
    ("MATCOMP_MAX_TRAIN_MIN", "abc", "$MATCOMP_MAX_TRAIN_MIN must be a number of minutes >= 0; got 'abc'"),
    ("MATCOMP_SET", "model.layers=2,model.layers=3",
     "$MATCOMP_SET: model.layers is given 2 times (2, 3); give each once"),
    ("MATCOMP_SEED", "-1", "$MATCOMP_SEED:"),
    ("MATCOMP_PRESET", "papre", "$MATCOMP_PRESET must be one of"),
])
def test_the_environment_is_checked_in_a_chapters_first_cell_before_any_run(variable, value, message, store,
                                                                              monkeypatch):
    from matcomp.book.build.sweep import notebook_parameters

    monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError, match=re.escape(message)):
        chapter_spec("sudden_drop").check(notebook_parameters("book/sudden_drop.ipynb"))
    assert nothing_in(store)


def test_a_field_given_twice_is_refused_wherever_overrides_are_typed(capsys):
    from matcomp.book.chapter import chapter_config

    with pytest.raises(ValueError, match=re.escape("overrides: train.lr is given 2 times (1e-3, 2e-3); give each")):
        chapter_config("smoke", overrides="train.lr=1e-3, train.lr=2e-3")
    assert "--set gives train.lr 2 times (1e-3, 2e-3); give each once" in refused(
        ["train", "--preset", "smoke", "--set", "train.lr=1e-3", "--set", "train.lr=2e-3"], capsys)


@pytest.mark.parametrize("value, serial", [("", False), ("0", False), ("1", True), ("false", None), ("yes", None)])
def test_matcomp_build_serial_is_read_strictly(value, serial, monkeypatch):
    from matcomp.book.build.parallel_build import serial_requested

    monkeypatch.setenv("MATCOMP_BUILD_SERIAL", value)
    if serial is None:
        with pytest.raises(ValueError, match=rf"\$MATCOMP_BUILD_SERIAL must be 1 .* or 0 or unset .*; got '{value}'"):
            serial_requested()
    else:
        assert serial_requested() is serial


def test_the_gpt_chapters_map_steps_past_the_run_or_swapped_are_refused():
    from matcomp.book.chapters.gpt import map_steps

    run = Run(Path("runs/reference") / next(p.name for p in Path("runs/reference").glob("cpu_gpt-*")))
    last = run.steps[-1]
    assert map_steps(run, 200, None, None) == (100, 450)  # the checkpoints nearest half and twice the copying step
    with pytest.raises(ValueError, match=f"parameter before = 999,999 is past the run's last checkpoint \\(step "
                                         f"{last:,}\\)"):
        map_steps(run, 200, 999999, None)
    with pytest.raises(ValueError, match=r"parameter before \(checkpoint 450\) must come before after \(checkpoint "
                                         r"100\)"):
        map_steps(run, 200, 450, 100)


def test_ood_reach_past_the_panels_is_refused_not_cut_short():
    from matcomp.analysis.ood import MAX_SIDE, default_axes
    from matcomp.config import DataConfig

    data = DataConfig(n_rows=7, n_cols=7, rank=1)
    assert default_axes(data, MAX_SIDE - 7)["rows"][-1] == MAX_SIDE
    with pytest.raises(ValueError, match=f"reach = 1,000 asks for 1,007 rows or columns; the panels stop at "
                                         f"{MAX_SIDE} .*: give reach <= {MAX_SIDE - 7}"):
        default_axes(data, 1000)


def test_a_gpu_preset_asked_of_a_chapter_on_a_cpu_is_refused_at_once_without_timing(store, monkeypatch):
    from matcomp.book.chapter import announce_training
    from matcomp.runs.cost import CostBook
    from matcomp.runs.store import locate

    def timed(*args, **kwargs):
        raise AssertionError("a step was timed")

    monkeypatch.setattr(CostBook, "measure", timed)
    cfg = preset_config("paper").override({"train.seed": 7})
    with pytest.raises(RunError, match=r"would train 50,000 steps here, at least .* on this cpu \(its fastest step, "
                                       r"from its FLOPs: .*\), beyond the chapters' default = 120 minutes"):
        announce_training(locate(cfg), "paper")
    assert nothing_in(store)


def test_many_seeds_are_announced_and_bounded_as_a_whole_before_the_first_trains(store, monkeypatch, capsys):
    from matcomp.analysis.seeds import seed_configs
    from matcomp.book.chapter import announce_runs, open_runs
    from matcomp.runs.store import locate

    configs = seed_configs(preset_config("smoke"), range(100, 1100))
    monkeypatch.setenv("MATCOMP_MAX_TRAIN_MIN", "10")
    with pytest.raises(RunError, match=r"1000 runs would train here, about .* in all, beyond \$MATCOMP_MAX_TRAIN_MIN "
                                       r"= 10 minutes .*: fewer seeds or arms"):
        open_runs(configs, "smoke")
    assert not any(store.glob("smoke-*"))  # not one trained
    announce_runs([locate(cfg) for cfg in list(configs.values())[:3]], "smoke")
    assert "3 runs must train here, about" in capsys.readouterr().out


def test_plan_measure_refuses_a_gpu_preset_on_a_cpu_at_once(store, monkeypatch, capsys):
    from matcomp.runs.cost import CostBook

    def timed(*args, **kwargs):
        raise AssertionError("a step was timed")

    monkeypatch.setattr(CostBook, "measure", timed)
    said = refused(["plan", "--preset", "paper", "--measure"], capsys)
    assert "--measure would time 14 shapes at preset paper, about" in said and "leave --measure out" in said


def test_a_sweep_names_its_out_and_cluster_before_any_point_and_keys_points_by_the_environment(store, tmp_path,
                                                                                               monkeypatch, capsys):
    import nbformat

    from matcomp.book.build.sweep import collect, run_sweep

    cell = nbformat.v4.new_code_cell("x = 1")
    cell.metadata["tags"] = ["parameters"]
    body = nbformat.v4.new_code_cell("from matcomp.book.build.sweep import record\nrecord(y=2 * x)")
    notebook = tmp_path / "chapter.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[cell, body], metadata={"kernelspec": {
        "name": "python3", "display_name": "Python 3", "language": "python"}}), notebook)
    monkeypatch.chdir(tmp_path)
    assert "--out is empty (an unset shell variable?)" in refused(
        ["sweep", str(notebook), "--out", "", "--param", "x", "1"], capsys)
    started = time.monotonic()
    assert "no Ray cluster answers at '127.0.0.1:1'" in refused(
        ["sweep", str(notebook), "--out", "o", "--param", "x", "1", "--address", "127.0.0.1:1"], capsys)
    assert time.monotonic() - started < 30 and not (tmp_path / "results.csv").exists()
    out = tmp_path / "out"
    first = run_sweep(notebook, [{"x": 1}], out)
    monkeypatch.setenv("MATCOMP_SET", "train.lr=2e-3")
    second = run_sweep(notebook, [{"x": 1}], out)
    assert first != second and len(list(out.glob("chapter-*.ipynb"))) == 2  # another config: run again, not reused
    table = collect(out, second)
    assert table.loc[0, "MATCOMP_SET"] == "train.lr=2e-3" and table.loc[0, "y"] == 2


def test_a_derivation_computed_says_so_on_the_console(tmp_path, capsys):
    import pandas as pd

    from matcomp.runs.derived import Derivation, load_or_compute

    table = pd.DataFrame({"a": [1.0]}, index=pd.Index([0], name="i"))
    derivation = Derivation("console_check", lambda: {"t": table}, params={"n": 1})
    load_or_compute(derivation, root=tmp_path)
    assert f"Computing console_check (not shipped or stored for these parameters); stored in {tmp_path}" in (
        capsys.readouterr().err)
    load_or_compute(derivation, root=tmp_path)
    assert "Computing" not in capsys.readouterr().err  # read back: nothing to say


# Round four: the library's functions and the scripts

REPO = Path(__file__).resolve().parents[1]


def one_line(err: pytest.ExceptionInfo) -> str:
    """The message of a refusal, which must be one line."""
    message = str(err.value)
    assert len(message.splitlines()) == 1, message
    return message


def test_the_tokenizer_refuses_nan_and_infinities_by_name():
    from matcomp.tokenizer import BERT_TOKENS

    with pytest.raises(ValueError) as err:
        BERT_TOKENS.encode(torch.tensor([0.5, float("nan"), float("inf")]))  # was ids [1051, 1, 1]
    assert one_line(err) == ("Tokenizer.encode: values must be finite; got nan at index (1,): a NaN or an infinity "
                             "has no token")
    with pytest.raises(ValueError, match="got -inf at index"):
        BERT_TOKENS.encode(torch.tensor([-float("inf")]), clamp=True)  # not clipped onto -10 either
    with pytest.raises(TypeError, match="Tokenizer.encode: values must be a torch.Tensor; got list"):
        BERT_TOKENS.encode([0.5, 0.2])
    with pytest.raises(TypeError, match="Tokenizer.decode: ids must be a tensor of integer ids; got torch.float32"):
        BERT_TOKENS.decode(torch.tensor([1.5]))
    with pytest.raises(ValueError, match=r"Tokenizer.replace_masked: value must be a finite number in \[-10.0, 10.0\]"):
        BERT_TOKENS.replace_masked(torch.tensor([0, 5]), float("nan"))
    with pytest.raises(ValueError, match=r"Tokenizer.encode_masked: observed has shape \(3,\), which is not that of "
                                         r"values, \(2,\)"):
        BERT_TOKENS.encode_masked(torch.tensor([0.5, 0.2]), torch.tensor([True, False, True]))


@pytest.mark.parametrize("metrics, kwargs, error, message", [
    ([1.0, 2.0], {}, TypeError, "detect_drop: metrics must be a pandas DataFrame (a run's metrics table); got list"),
    (None, {}, TypeError, "detect_drop: metrics must be a pandas DataFrame (a run's metrics table); got NoneType"),
    ("empty", {}, ValueError, "detect_drop: metrics is empty: it has no rows"),
    ("no L_mask", {}, ValueError, "detect_drop: metrics has no column 'L_mask'; its columns: ['step', 'L']"),
    ("table", {"window": float("nan")}, TypeError, "detect_drop: window must be an integer >= 1; got nan (float)"),
    ("table", {"plateau_steps": 0}, ValueError, "detect_drop: plateau_steps must be an integer >= 1; got 0"),
    ("table", {"skip": -1}, ValueError, "detect_drop: skip must be an integer >= 0; got -1"),
], ids=["a list", "None", "an empty table", "no L_mask", "a NaN window", "no plateau steps", "a negative skip"])
def test_detect_drop_names_what_it_cannot_read(metrics, kwargs, error, message):
    import pandas as pd

    from matcomp.drop import detect_drop

    tables = {"empty": pd.DataFrame({"step": [], "L_mask": []}), "no L_mask": pd.DataFrame({"step": [1], "L": [1.0]}),
              "table": pd.DataFrame({"step": range(1, 700), "L_mask": [0.2] * 699})}
    with pytest.raises(error) as err:
        detect_drop(tables.get(metrics, metrics) if isinstance(metrics, str) else metrics, **kwargs)
    assert one_line(err) == message


def test_the_losses_refuse_shapes_that_do_not_match_by_name():
    from matcomp.metrics import loss_ratio, masked_mse

    target, observed = torch.zeros(2, 3, 3), torch.ones(2, 3, 3, dtype=torch.bool)
    assert masked_mse(torch.zeros(2, 9), target, observed)["L"] == 0  # a model's (B, m·n) predictions: reshaped
    with pytest.raises(ValueError) as err:
        masked_mse(torch.zeros(3, 6), target, observed)  # 18 entries too, but three matrices: was reshaped silently
    assert one_line(err) == "masked_mse: pred has shape (3, 6), which does not hold the entries of target, (2, 3, 3)"
    with pytest.raises(ValueError, match=r"masked_mse: observed has shape \(3, 3, 3\), which is not that of target"):
        masked_mse(torch.zeros(2, 9), target, torch.ones(3, 3, 3, dtype=torch.bool))
    with pytest.raises(TypeError, match="masked_mse: observed must be a tensor of bools; got torch.float32"):
        masked_mse(torch.zeros(2, 9), target, torch.ones(2, 3, 3))
    with pytest.raises(ValueError, match=r"loss_ratio: base has shape \(2, 8\)"):
        loss_ratio(torch.zeros(2, 9), torch.zeros(2, 8), target, observed)


def test_an_analysis_names_its_own_argument_not_sample_batch_s(micro, tmp_path):
    from matcomp.analysis.evaluation import copy_check, second_moments
    from matcomp.analysis.key_numbers import read_observed, read_probing
    from matcomp.analysis.phases import Phases

    run = get_or_train(micro, progress=False, root=tmp_path)
    with pytest.raises(ValueError) as err:
        copy_check(run.bert(40), micro.data, samples=0)
    assert one_line(err) == "copy_check: samples must be an integer >= 1; got 0"
    with pytest.raises(ValueError, match=r"copy_check: seed must be an integer in \[0, 9,223,372,036,853,775,807\]"):
        copy_check(run.bert(40), micro.data, seed=2 ** 70)
    with pytest.raises(TypeError, match="second_moments: samples must be an integer >= 1; got 2.5"):
        second_moments([micro.data], 2.5)
    with pytest.raises(TypeError, match="copy_check: data must be a DataConfig"):
        copy_check(run.bert(40), micro, samples=4)
    phases = Phases(dropped=True, plateau=(20,), pre=20, copy_steps=(20,), post=40)
    with pytest.raises(ValueError, match="^train_matrices must be an integer >= 1; got -5$"):
        read_probing(run, phases, train_matrices=-5, test_matrices=8)
    with pytest.raises(ValueError, match="^permutations must be an integer >= 1; got 0$"):
        read_observed(run, phases, samples=8, eval_seed=0, permutations=0)


@pytest.mark.parametrize("chapter, name, value, message", [
    ("task", "example_seed", 99999999999999999999, "an integer in [0, 9,223,372,036,853,775,807] (a seed)"),
    ("attention_patching", "eval_seed", 2 ** 70, "an integer in [0, 9,223,372,036,853,775,807] (a seed)"),
    ("embeddings", "tsne_seed", 2 ** 32, "an integer in [0, 4,294,967,295] (a seed)"),
], ids=["example_seed", "eval_seed", "tsne_seed"])
def test_a_seed_beyond_its_generator_is_refused_by_its_parameter_name(chapter, name, value, message):
    from matcomp.book.build.sweep import notebook_parameters

    defaults = notebook_parameters(f"book/{chapter}.ipynb")
    with pytest.raises(ValueError) as err:  # was torch's "Overflow when unpacking long long", in a later cell
        chapter_spec(chapter).check({**defaults, name: value})
    assert one_line(err) == f"the {chapter} chapter's parameter {name} must be {message}; got {value!r}"
    chapter_spec(chapter).check({**defaults, name: 2 ** 31})  # a large seed in range passes


def test_every_seed_the_library_takes_is_checked_by_name():
    from matcomp.analysis.embeddings import tsne_layout
    from matcomp.analysis.positions import position_permutation
    from matcomp.analysis.variants import undetermined_fraction
    from matcomp.seeding import MAX_ANALYSIS_SEED, seeded, stream

    assert analysis_generator(MAX_ANALYSIS_SEED).initial_seed() == 2 ** 63 - 1  # the largest passes
    for call, message in [
        (lambda: analysis_generator(MAX_ANALYSIS_SEED + 1), "seed must be an integer in [0, 9,223,372,036,853,775,"),
        (lambda: analysis_generator(-1), "seed must be an integer in [0, "),  # was wrapped round to 10^6 - 1
        (lambda: analysis_generator(2 ** 70, "eval_seed"), "eval_seed must be an integer in [0, "),
        (lambda: analysis_generator("3"), "seed must be an integer in [0, 9,223,372,036,853,775,807]; got '3' (str)"),
        (lambda: stream(2 ** 61, 1), "seed must be an integer in [0, 9,223,372,036,854,775]"),
        (lambda: seeded(2 ** 64).__enter__(), "seed must be an integer in [0, 9,223,372,036,854,775,807]"),
        (lambda: position_permutation(5, seed=2 ** 64), "seed must be an integer in [0, "),
        (lambda: undetermined_fraction(3, 3, 0.3, samples=4, seed=-1), "seed must be an integer in [0, "),
        (lambda: tsne_layout(torch.randn(10, 3), seed=2 ** 32), "tsne_layout: seed must be an integer in [0, 4,"),
    ]:
        with pytest.raises((ValueError, TypeError)) as err:
            call()
        assert message in one_line(err)


def test_an_allocation_beyond_the_memory_limit_is_refused_by_name_before_any_work(micro, monkeypatch):
    from matcomp.analysis.evaluation import second_moments
    from matcomp.limits import ENV_MAX_MEMORY_GB

    monkeypatch.setenv(ENV_MAX_MEMORY_GB, "0.001")  # 1 MiB: a test's limit, never a real allocation
    with pytest.raises(ValueError) as err:  # was PyTorch's RuntimeError from its CPU allocator, mid-work
        sample_batch(micro.data, 10 ** 12, analysis_generator(0))
    assert one_line(err).startswith("sample_batch: batch = 1,000,000,000,000 would need about ")
    assert "GiB of memory, beyond the 0.001 GiB here ($MATCOMP_MAX_MEMORY_GB); ask for fewer" in str(err.value)
    with pytest.raises(ValueError, match=r"^second_moments: samples = 1,000,000,000 would need about [\d,.]+ GiB"):
        second_moments([micro.data, micro.data], 10 ** 9)  # the task chapter's moment_samples
    assert len(sample_batch(micro.data, 100, analysis_generator(0))) == 100  # within the limit: drawn
    monkeypatch.delenv(ENV_MAX_MEMORY_GB)
    with pytest.raises(ValueError, match="GiB here \\(this machine's memory\\)"):  # no allocation is tried
        sample_batch(micro.data, 10 ** 15, analysis_generator(0))
    monkeypatch.setenv(ENV_MAX_MEMORY_GB, "lots")
    with pytest.raises(ValueError, match=r"^\$MATCOMP_MAX_MEMORY_GB must be a number of GiB > 0; got 'lots'$"):
        sample_batch(micro.data, 10, analysis_generator(0))


def script(args: list[str], tmp_path: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run one of the repository's scripts as a user does, from ``tmp_path``."""
    environment = {**os.environ, "PYTHONPATH": str(REPO / "lib"), **(env or {})}
    return subprocess.run(args, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=120)


def refused_script(done: subprocess.CompletedProcess, code: int) -> str:
    """A script's refusal: exit ``code`` and at most two lines on stderr, no traceback."""
    assert done.returncode == code, done.stderr
    lines = done.stderr.strip().splitlines()
    assert 1 <= len(lines) <= 2 and "Traceback" not in done.stderr, done.stderr
    return done.stderr


@pytest.mark.parametrize("args, message", [
    (["--height", "-5"], "argument --height: must be an integer >= 1 and <= 100000; got '-5'"),
    (["--wait-ms", "-1"], "argument --wait-ms: must be an integer >= 0 and <= 300000; got '-1'"),
    (["--width", "0"], "argument --width: must be an integer >= 1 and <= 100000; got '0'"),
    (["--tile", "tall"], "argument --tile: must be an integer >= 1 and <= 100000; got 'tall'"),
    (["--out", "FILE"], "argument --out: FILE is a file, not a folder for the tiles"),
], ids=["a negative height", "a negative wait", "no width", "a tile that is not a number", "a file as --out"])
def test_the_screenshot_script_refuses_bad_sizes_and_a_file_before_chromium_starts(args, message, tmp_path):
    (tmp_path / "FILE").write_text("not a folder")
    done = script([sys.executable, str(REPO / "scripts" / "screenshots.py"), *args], tmp_path)
    assert message in refused_script(done, 2)
    assert (tmp_path / "FILE").read_text() == "not a folder"


def built(checkout: Path, printed: str | None) -> Path:
    """``checkout`` as a build leaves it: its jupyter-cache holding one chapter that printed ``printed`` (None: a
    build that executed nothing, an empty cache)."""
    import nbformat
    from jupyter_cache import get_cache

    cache = get_cache(checkout / "_build" / ".jupyter_cache")
    cache.list_cache_records()  # the database, created
    if printed is not None:
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"print({printed!r})")])
        nb.cells[0].outputs = [nbformat.v4.new_output("stream", text=printed + "\n")]
        nbformat.write(nb, checkout / "task.ipynb")
        cache.cache_notebook_file(checkout / "task.ipynb", check_validity=False)
    return checkout / "_build" / ".jupyter_cache"


def files_of(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_compare_outputs_reads_a_cells_split_prints_as_one_and_masks_what_changes_every_run():
    """Where a kernel's flushes split what one cell prints into several stream outputs is timing: two builds
    of the same page must compare equal however it fell."""
    import importlib.util

    import nbformat
    spec = importlib.util.spec_from_file_location("compare_outputs", REPO / "scripts" / "compare_outputs.py")
    compare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compare)
    out = nbformat.v4.new_output
    split = nbformat.v4.new_code_cell(outputs=[out("stream", text="a\n"), out("stream", text="b\n"),
                                               out("display_data", {"text/plain": "<x at 0x7f3a>"})])
    whole = nbformat.v4.new_code_cell(outputs=[out("stream", text="a\nb\n"),
                                               out("display_data", {"text/plain": "<x at 0x1b2c>"})])
    after = nbformat.v4.new_code_cell(outputs=[out("stream", text="c\n"),  # another cell's print stays apart,
                                               out("stream", name="stderr", text="d\n")])  # and so does stderr
    read = compare.notebook_outputs(nbformat.v4.new_notebook(cells=[split, after]))
    assert read == compare.notebook_outputs(nbformat.v4.new_notebook(cells=[whole, after]))
    assert read == [("stream", "a\nb\n"), ("text/plain", "<x at 0x>"), ("stream", "c\n"), ("stream", "d\n")]


def test_compare_outputs_refuses_a_build_with_no_executed_chapter_and_writes_into_neither(tmp_path):
    compare = [sys.executable, str(REPO / "scripts" / "compare_outputs.py")]
    empty, before, after = (tmp_path / name for name in ("empty", "before", "after"))
    built(empty, None), built(before, "1"), built(after, "2")
    held = {folder: files_of(folder) for folder in (empty, before, after)}
    said = refused_script(script([*compare, str(before), str(empty)], tmp_path), 1)  # was "0 outputs differ", rc 0
    assert f"error: {empty / '_build' / '.jupyter_cache'} holds no executed chapter: build the book in {empty} first" \
        in said
    done = script([*compare, str(before), str(after)], tmp_path)
    assert done.returncode == 1 and "task.ipynb" in done.stdout and "1 outputs differ" in done.stdout
    assert {folder: files_of(folder) for folder in held} == held  # nothing written into any build read
    assert "BEFORE and AFTER are the same checkout" in refused_script(script([*compare, str(before), str(before)],
                                                                             tmp_path), 2)


def test_a_damaged_jupyter_cache_is_one_line_naming_it_and_what_to_do(tmp_path):
    from jupyter_cache import get_cache

    from matcomp.book.build.executed import build_execution, inputs_fingerprint, latest_executions, record_inputs

    cache_path = built(tmp_path / "checkout", "1")
    record_inputs(get_cache(cache_path), [str(tmp_path / "checkout" / "task.ipynb")], inputs_fingerprint())
    (cache_path / "global.db").write_bytes(b"not a database" * 100)  # SQLAlchemy: "file is not a database"
    fix = f"{cache_path / 'global.db'} is damaged (file is not a database): delete {cache_path} and build the book " \
          f"again (jupyter-book build .)"
    for read in (lambda: latest_executions(cache_path), lambda: build_execution(tmp_path / "checkout" / "task.ipynb",
                                                                                 cache_path)):
        with pytest.raises(ValueError) as err:
            read()
        assert one_line(err) == fix
    done = script([sys.executable, str(REPO / "scripts" / "compare_outputs.py"), str(tmp_path / "checkout"),
                   str(built(tmp_path / "other", "1").parents[1])], tmp_path)
    assert f"error: {fix}" in refused_script(done, 1)


def fake_git(tmp_path: Path) -> dict:
    """A PATH whose git clones nothing: it makes the clone's folder with a file in it, then fails, as a clone cut
    short does; anything else goes to the real git."""
    import shutil

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(f'#!/bin/bash\nif [[ " $* " == *" clone "* ]]; then mkdir -p "${{@: -1}}"; '
                                 f'echo big > "${{@: -1}}/history"; exit 1; fi\nexec {shutil.which("git")} "$@"\n')
    (bin_dir / "git").chmod(0o755)
    (tmp_path / "tmp").mkdir()
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "TMPDIR": str(tmp_path / "tmp")}


def test_fresh_clone_checks_the_revision_before_cloning_and_cleans_up_on_any_exit(tmp_path):
    env = fake_git(tmp_path)
    fresh_clone = ["bash", str(REPO / "benchmarks" / "fresh_clone.sh")]
    said = refused_script(script([*fresh_clone, "bogusrev"], tmp_path, env), 2)  # was a 543 MB clone, then git's no
    assert said.strip() == (f"error: bogusrev is not a commit of {REPO} (git log --oneline lists them); nothing was "
                            f"cloned")
    assert "one revision at most" in refused_script(script([*fresh_clone, "HEAD", "HEAD~1"], tmp_path, env), 2)
    said = refused_script(script(fresh_clone, tmp_path, {**env, "SLOWEST": "ten"}), 2)
    assert said.strip() == "error: SLOWEST must be a whole number of tests (1 or more); got 'ten'"
    assert not list((tmp_path / "tmp").iterdir())
    done = script([*fresh_clone, "HEAD"], tmp_path, env)  # a good revision whose clone fails half-way
    assert done.returncode == 1 and not list((tmp_path / "tmp").iterdir())  # its temporary folder removed


def test_the_other_analyses_that_draw_matrices_name_their_own_count_and_seed(micro, tmp_path, monkeypatch):
    from matcomp.analysis.baselines import completion_sweep, lambda_derivation, lambda_draws
    from matcomp.analysis.embeddings import task_values
    from matcomp.analysis.ood import axis_variants, shifted_losses
    from matcomp.analysis.progress import progress_derivation
    from matcomp.analysis.variants import undetermined_fraction
    from matcomp.limits import ENV_MAX_MEMORY_GB

    run = get_or_train(micro, progress=False, root=tmp_path)
    for call, message in [
        (lambda: task_values(micro.data, 0), "task_values: samples must be an integer >= 1; got 0"),
        (lambda: task_values(micro.data, 8, seed=-3), "task_values: seed must be an integer in [0, "),
        (lambda: shifted_losses(run.bert(40), axis_variants(micro.data, "rank", [1]), samples=-2),
         "shifted_losses: samples must be an integer >= 1; got -2"),
        (lambda: completion_sweep(micro.data, [0.3], samples=True, lam=0.1),
         "completion_sweep: samples must be an integer >= 1; got True (bool)"),
        (lambda: lambda_draws(micro.data, 0.1, 8, seeds=[0, 2 ** 64]), "lambda_draws: each of seeds must be an "),
        (lambda: lambda_derivation(micro.data, [0.1], samples="64"), "lambda_derivation: samples must be an integer"),
        (lambda: progress_derivation(run, samples=0), "progress_derivation: samples must be an integer >= 1; got 0"),
        (lambda: undetermined_fraction(3, 3, 0.3, samples=0), "undetermined_fraction: samples must be an integer >= 1"),
    ]:
        with pytest.raises((ValueError, TypeError)) as err:
            call()
        assert message in one_line(err)
    monkeypatch.setenv(ENV_MAX_MEMORY_GB, "0.001")
    with pytest.raises(ValueError, match="^undetermined_fraction: samples = 10,000,000 would need about 0.4 GiB"):
        undetermined_fraction(3, 3, 0.3, samples=10 ** 7)


# Round four: the run store, resumes and records

def _paused(cfg, root: Path) -> RunFolder:
    """``cfg``'s run trained to its checkpoint of step 20 in ``root`` and paused there, as an interrupted command
    leaves it."""
    with pytest.raises(matcomp.runs.training.Paused):
        get_or_train(cfg, progress=False, stop_at=20, root=root)
    return RunFolder(root / cfg.run_id)


def _zero_64_bytes(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-200:-136] = bytes(64)  # in the weights: the header, and so the file's metadata and shapes, intact
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage, problem", [
    ("64 bytes zeroed", "step_000010.safetensors has changed since its training wrote it"),
    ("another model's checkpoint", "step_000010.safetensors holds the weights of another model"),
    ("another run's resume.pt", "resume.pt is the training state of another run"),
    ("a checkpoint it never wrote", "step_000005.safetensors is not a checkpoint that this run's training wrote"),
    ("a resume.pt from before its records", "resume.pt records neither its run nor the SHA-256 of its checkpoints"),
    ("a checkpoint deleted", "step_000010.safetensors is missing"),
    ("resume.pt's bytes changed", "resume.pt is damaged: its contents differ from the SHA-256 it was written with"),
    ("the table's bytes changed", "metrics.parquet has changed since its training wrote it"),
])
def test_a_resumed_run_checks_every_checkpoint_it_holds_and_remakes_a_damaged_one(damage, problem, micro, store):
    from matcomp.models.factory import build_model

    folder = _paused(micro, store)
    before = folder.checkpoint_path(10).read_bytes()
    if damage == "64 bytes zeroed":
        _zero_64_bytes(folder.checkpoint_path(10))
    elif damage == "another model's checkpoint":
        other = micro.override({"model.hidden": 8})
        folder.write_checkpoint(10, build_model(other.model, seed=0).state_dict(), other)
    elif damage == "another run's resume.pt":
        other = _paused(micro.override({"train.seed": 1}), store / "other")
        folder.resume_path.write_bytes(other.resume_path.read_bytes())
    elif damage == "a checkpoint it never wrote":
        folder.write_checkpoint(5, build_model(micro.model, seed=3).state_dict(), micro)
    elif damage == "a resume.pt from before its records":
        state = folder.read_resume()
        del state["run"], state["checkpoint_sha256"]
        folder.write_resume(state)
    elif damage == "a checkpoint deleted":
        folder.checkpoint_path(10).unlink()
    else:  # PyTorch's archive and Parquet check none of their bytes: both load, with other values
        path, at = (folder.resume_path, 4) if damage.startswith("resume.pt") else (folder.metrics_path, 2)
        data = bytearray(path.read_bytes())
        data[len(data) // at:len(data) // at + 64] = bytes(64)
        path.write_bytes(bytes(data))
        assert folder.read_metrics().step.max() == 20  # the table still reads
    with pytest.warns(UserWarning, match=re.escape(problem) + ".*moved to .* and training again"):
        run = get_or_train(micro, progress=False)
    assert run.folder.checkpoint_path(10).read_bytes() == before  # made again, as it was before the damage
    assert run.steps == [0, 10, 15, 20, 30, 40] and len(list(store.glob("*.broken-*"))) == 1


def test_a_checkpoint_damaged_while_a_run_trains_on_is_never_sealed(micro, store, monkeypatch):
    folder = _paused(micro, store)
    real, calls = matcomp.runs.training.train_step, [0]

    def damage_checkpoint_10_on_the_way(*args):
        calls[0] += 1
        if calls[0] == 5:  # after the resume's check, before the seal's
            _zero_64_bytes(folder.checkpoint_path(10))
        return real(*args)

    monkeypatch.setattr(matcomp.runs.training, "train_step", damage_checkpoint_10_on_the_way)
    with pytest.raises(RunError, match="is not whole \\(step_000010.safetensors has changed since its training wrote "
                                       "it.*moved to"):
        get_or_train(micro, progress=False)
    assert not folder.path.exists() and not any((p / "complete.json").exists() for p in store.glob("*.broken-*"))


def test_a_run_copied_under_another_runs_name_is_damaged_wherever_it_is_read(micro, store, capsys):
    from matcomp.runs.run import open_run

    run = get_or_train(micro, progress=False)
    other = micro.override({"train.seed": 1})
    copy = store / other.run_id
    import shutil
    shutil.copytree(run.path, copy)
    said = f"the folder is named {other.run_id} but holds run {micro.run_id}"
    main(["runs"])
    assert f"{other.run_id} [damaged: {said}" in capsys.readouterr().out
    for read in (open_run, Run):
        with pytest.raises(ValueError, match=re.escape(said)):
            read(copy)
    with pytest.warns(UserWarning, match="config.json differs from the requested config"):
        assert get_or_train(other, progress=False).config.train.seed == 1  # trained, the copy kept aside


@pytest.mark.parametrize("argv, message", [
    (["unpack", "PACKED", "--into", ""], "argument --into: must name a folder; got ''"),
    (["unpack", ""], "argument folders: must name a folder; got ''"),
    (["remote", "--preset", "smoke", "--out", ""], "argument --out: must name a folder; got ''"),
], ids=["unpack into ''", "unpack ''", "remote --out ''"])
def test_an_empty_path_is_refused_by_its_option(argv, message, tmp_path, store, capsys):
    from matcomp.runs.shipped import REFERENCE_ROOT

    shipped_before = sorted(p.name for p in REFERENCE_ROOT.iterdir())
    argv = [str(tmp_path) if a == "PACKED" else a for a in argv]
    assert message in refused(argv, capsys, code=2)
    assert sorted(p.name for p in REFERENCE_ROOT.iterdir()) == shipped_before and nothing_in(store)
    from matcomp.runs.transfer import TransferError, unpack
    with pytest.raises(TransferError, match="the store to install into is empty"):
        unpack([tmp_path], "")
    with pytest.raises(TransferError, match="a folder of packed files is empty"):
        unpack([""], tmp_path / "reference")


def test_remote_checks_its_out_before_it_trains(immutable, store, tmp_path, capsys):
    started = time.perf_counter()
    assert f"the folder for the packed parts (out) {immutable} cannot be written" in refused(
        ["remote", "--preset", "smoke", "--out", str(immutable), "--quiet"], capsys)
    (tmp_path / "file").write_text("")
    assert "which is (or lies under) a file" in refused(
        ["remote", "--preset", "smoke", "--out", str(tmp_path / "file" / "out"), "--quiet"], capsys)
    assert time.perf_counter() - started < 10 and nothing_in(store)  # nothing trained


def test_stop_at_that_cannot_pause_the_run_is_refused(store, capsys):
    assert "--stop-at 250: run cpu-f603ff8bc5 is shipped finished (runs/reference), nothing to pause; add " \
           "--no-shipped" in refused(["train", "--preset", "cpu", "--stop-at", "250"], capsys)
    main(["train", *SHORT, "--quiet", "--stop-at", "20"])
    assert "has trained to step 20 in" in refused(["train", *SHORT, "--quiet", "--stop-at", "10"], capsys)
    main(["train", *SHORT, "--quiet"])
    assert "is finished in" in refused(["train", *SHORT, "--quiet", "--stop-at", "30"], capsys)


def test_unpack_says_which_other_runs_items_it_left(micro, store, tmp_path, capsys):
    from matcomp.runs.transfer import pack_checkpoint, pack_record

    run, other = (get_or_train(cfg, progress=False) for cfg in (micro, micro.override({"train.seed": 1})))
    out = tmp_path / "packed"
    pack_record(run, out)
    pack_checkpoint(run, 40, out)
    pack_checkpoint(other, 40, out)
    main(["unpack", str(out), "--into", str(tmp_path / "reference")])
    said = capsys.readouterr().out
    assert f"installed {tmp_path / 'reference' / micro.run_id}" in said
    assert f"left as they are, not {micro.run_id}'s: {other.config.run_id}.step_000040.json" in said


@pytest.mark.parametrize("damage, message", [
    ("no parts", "is a damaged manifest: its parts is missing or not of its kind"),
    ("cut short", "is a damaged manifest: not valid JSON"),
    ("another item", "is a damaged manifest: it names item 'step_000040'"),
    ("parts of another kind", "is a damaged manifest: its parts are not a list of file, bytes and sha256"),
])
def test_a_damaged_record_manifest_is_named_not_found_none(damage, message, micro, store, tmp_path, capsys):
    from matcomp.runs.transfer import pack_record

    out = tmp_path / "packed"
    manifest = pack_record(get_or_train(micro, progress=False), out)[-1]
    text = manifest.read_text()
    fields = json.loads(text)
    if damage == "no parts":
        del fields["parts"]
    elif damage == "another item":
        fields["item"] = "step_000040"
    elif damage == "parts of another kind":
        fields["parts"] = ["a"]
    manifest.write_text(text[:len(text) // 2] if damage == "cut short" else json.dumps(fields))
    assert message in refused(["unpack", str(out), "--into", str(tmp_path / "reference")], capsys)
    assert not (tmp_path / "reference" / micro.run_id).exists()


def test_ship_add_steps_without_the_retraining_names_the_command(store, capsys):
    message = refused(["ship", "--preset", "cpu", "--add-steps", "500"], capsys)
    assert "no retraining of cpu-f603ff8bc5 in" in message
    assert "(python -m matcomp train --preset cpu --threads 1 --no-shipped --stop-at 500)" in message


def test_a_seal_without_its_fields_is_damage_not_a_traceback(store, capsys):
    main(["train", *SHORT, "--quiet"])
    path = next(p for p in store.glob("smoke-*") if p.is_dir())
    seal = json.loads((path / "complete.json").read_text())
    for field in ("files", "sha256"):
        (path / "complete.json").write_text(json.dumps({k: v for k, v in seal.items() if k != field}))
        main(["runs"])
        assert f"{path.name} [damaged: complete.json records no" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["plan", "--preset", "smoke"],
                                  ["sweep", "book/sudden_drop.ipynb", "--out", "OUT", "--param", "seed", "0",
                                   "--fixed", "preset=smoke"]])
def test_max_train_min_is_checked_by_every_command_that_reads_it_before_any_work(argv, store, monkeypatch,
                                                                                 tmp_path, capsys):
    monkeypatch.setenv("MATCOMP_MAX_TRAIN_MIN", "abc")
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in argv]
    assert "$MATCOMP_MAX_TRAIN_MIN must be a number of minutes >= 0; got 'abc'" in refused(argv, capsys)
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="MATCOMP_MAX_TRAIN_MIN"):
        chapter_config("smoke")


def test_memory_beyond_the_machine_is_refused_by_the_parameter_that_asks_for_it(store, monkeypatch, capsys):
    import matcomp.limits

    monkeypatch.setattr(matcomp.limits, "ram_bytes", lambda: 2 ** 30)  # a machine of 1 GiB
    said = refused(["train", *SHORT, "--force", "--set", "train.batch=100000000", "--quiet"], capsys)
    assert "sample_batch: batch = 100,000,000 would need about" in said and "beyond the 1.0 GiB here" in said
    assert "GiB of memory; this cpu has 1.0 (train.batch 100,000,000" in refused(
        ["bench", "--preset", "smoke", "--set", "train.batch=100000000"], capsys)
    with pytest.raises(ValueError, match="sample_batch: batch = 1,000,000,000,000 would need about"):
        sample_batch(preset_config("smoke").data, 10 ** 12, analysis_generator(0))


def test_allocation_and_disk_failures_in_training_are_one_line_naming_the_run(store, monkeypatch, capsys):
    def out_of_memory(*args):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory: you "
                           "tried to allocate 40000000000000 bytes")

    monkeypatch.setattr(matcomp.runs.training, "train_step", out_of_memory)
    said = refused(["train", *SHORT, "--quiet"], capsys)
    assert re.search(r"run smoke-\w+ ran out of memory \(.*can't allocate memory.*\) on cpu: a step needs about .* "
                     r"GiB \(train.batch 32", said), said
    monkeypatch.undo()
    monkeypatch.setenv("MATCOMP_RUNS", str(store))
    real = RunFolder.write_resume

    def disk_full_at_step_20(self, state):
        if state["step"] == 20:
            raise OSError(28, "No space left on device", str(self.resume_path))
        return real(self, state)

    monkeypatch.setattr(RunFolder, "write_resume", disk_full_at_step_20)
    said = refused(["train", *SHORT, "--quiet"], capsys)
    assert "the disk is full (No space left on device) writing" in said and "resume.pt" in said
    folder = RunFolder(next(store.glob("smoke-*")))
    assert folder.resume_step() == 10 and not folder.complete_path.exists()  # nothing lost: it resumes from 10
    monkeypatch.undo()
    monkeypatch.setenv("MATCOMP_RUNS", str(store))
    main(["train", *SHORT, "--quiet"])
    assert "final step 40" in capsys.readouterr().out


@pytest.mark.parametrize("length", ["a component of 300", "5,000 in all"])
def test_a_run_store_path_too_long_is_named(length, tmp_path, monkeypatch, capsys, micro):
    long = tmp_path / ("a" * 300) if length.startswith("a component") else Path("/" + "/".join(["abcd"] * 1000))
    monkeypatch.setenv("MATCOMP_RUNS", str(long))
    for argv in (["train", *SHORT], ["runs"], ["plan", "--preset", "smoke"]):
        assert f"$MATCOMP_RUNS ({len(str(long)):,} characters) cannot be a folder here (File name too long)" in \
            refused(argv, capsys)
    assert "cannot be made (File name too long)" in refused(
        ["remote", "--preset", "smoke", "--out", str(tmp_path / ("b" * 300))], capsys)
    assert "is too long for this system" in refused(["unpack", str(tmp_path / ("c" * 300))], capsys)


def test_the_run_layer_names_the_argument_at_fault(micro, store):
    from matcomp.runs.run import open_run

    for path in (123, None):
        with pytest.raises(TypeError, match=f"path must name a run folder \\(a str or Path\\); got .* {path}"):
            open_run(path)
    with pytest.raises(ValueError, match="path is empty"):
        open_run("")
    run = get_or_train(micro, progress=False)
    for step, kind in (("100", TypeError), (float("nan"), ValueError), (float("inf"), ValueError),
                       (None, TypeError)):
        with pytest.raises(kind, match=f"nearest_step: step must be a (finite )?number .*got .*{step}"):
            run.nearest_step(step)
    assert run.nearest_step(16.0) == 15
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="checkpoint: device 'cuda' is not here"):
            run.checkpoint(10, device="cuda")
    with pytest.raises(ValueError, match="checkpoint: device must be auto, cpu, cuda or cuda:N; got 'gpu'"):
        run.checkpoint(10, device="gpu")


def test_paper_on_gpu_checks_seed_and_out_before_the_engine_test(tmp_path):
    import sys

    env = {**os.environ, "SMOKE": "1", "OUT": str(tmp_path / "made" / "here"),
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    started = time.perf_counter()
    done = subprocess.run(["bash", "scripts/paper_on_gpu.sh", "run", "abc"], env=env, capture_output=True, text=True)
    assert done.returncode != 0 and done.stderr.strip() == "SEED: train.seed must be an integer; got 'abc'"
    assert time.perf_counter() - started < 20 and (tmp_path / "made" / "here").is_dir()  # OUT made, nothing run
    (tmp_path / "file").write_text("")
    env["OUT"] = str(tmp_path / "file" / "out")
    done = subprocess.run(["bash", "scripts/paper_on_gpu.sh", "checkpoint", "0", "eager", "100"], env=env,
                          capture_output=True, text=True)
    assert done.returncode == 2 and "cannot be made or written" in done.stderr and "tee" not in done.stderr


@pytest.mark.parametrize("value", ["false", "yes", "2"])
def test_no_training_is_1_or_0_and_another_value_is_named_before_any_work(value, store, monkeypatch, capsys):
    from matcomp.runs.store import training_forbidden

    monkeypatch.setenv("MATCOMP_NO_TRAINING", value)
    for argv in (["runs"], ["train", *SHORT], ["plan", "--preset", "smoke"]):
        assert f"$MATCOMP_NO_TRAINING must be 1 (training is an error) or 0 (unset: training allowed); got " \
               f"'{value}'" in refused(argv, capsys)
    assert nothing_in(store)
    monkeypatch.setenv("MATCOMP_NO_TRAINING", "0")  # was: set to anything, training forbidden
    assert not training_forbidden()


def test_a_kernel_without_its_stderr_copy_says_it_on_the_process_console_not_in_the_cell(monkeypatch, capsys):
    import sys
    import types

    from matcomp.console import say

    cell = types.new_class("OutStream", (), {}, lambda ns: ns.update(__module__="ipykernel.iostream"))()
    cell.write = lambda text: pytest.fail(f"written into the cell's stderr: {text!r}")
    cell._original_stdstream_copy = None  # ipykernel keeps no copy of the process's stderr
    console = types.SimpleNamespace(lines=[], write=lambda text: console.lines.append(text), flush=lambda: None)
    monkeypatch.setattr(sys, "stderr", cell)
    monkeypatch.setattr(sys, "__stderr__", console)
    say("Computing x", page=False)
    assert "".join(console.lines) == "Computing x\n" and capsys.readouterr().out == ""
