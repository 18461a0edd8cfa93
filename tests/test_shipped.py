"""The shipped runs (``runs/reference/``) are ours and current; the two models the chapters analyse
(the ``cpu`` 4×4 run and the ``cpu7x7`` run) replay bit for bit.

If a test here fails after a code change, the shipped run no longer matches what the code
trains: regenerate it with the command in its ``complete.json`` (also in the README).
"""

import pandas as pd
import pytest
import torch

from matcomp.analysis.progress import MEASURES, checkpoint_measures, progress_table, recorded_tables
from matcomp.book.build.plan import plan
from matcomp.data import sample_batch
from matcomp.presets import preset_config
from matcomp.runs.folder import RunFolder
from matcomp.runs.machine import machine
from matcomp.runs.run import Run, verify
from matcomp.runs.shipped import REFERENCE_ROOT, find_reference
from matcomp.runs.training import train
from matcomp.seeding import analysis_generator

REPLAY_STEPS = 100  # the first evaluation of both runs (eval_every 100) and a checkpoint; 200 took twice as long
REGENERATE = "regenerate the shipped run with the command in its complete.json"


def written(cfg, last: int) -> list[int]:
    """The steps a run of ``cfg`` that ended at ``last`` checkpointed (it stops early after its drop)."""
    return sorted({step for step in cfg.train.checkpoint_schedule if step <= last} | {last})


@pytest.fixture(scope="module", params=["cpu", "cpu7x7"])
def shipped(request):
    run = find_reference(preset_config(request.param))
    assert run is not None, f"no shipped run matches the {request.param} preset: {REGENERATE}"
    return run


@pytest.mark.parametrize("path", sorted(p for p in REFERENCE_ROOT.glob("*-*") if p.is_dir()), ids=lambda p: p.name)
def test_every_shipped_run_is_whole_and_what_its_command_trains(path):
    run = Run(path)
    train_command = run.summary["command"].split(" && ")[0].split()
    sets = dict(train_command[i + 1].split("=", 1) for i, word in enumerate(train_command) if word == "--set")
    assert verify(run.folder, preset_config(run.config.name).override(sets)) is None
    last = int(run.metrics.step.iloc[-1])  # the checkpoints the chapters read are shipped, if any
    assert run.last_step == last and set(run.steps) <= set(written(run.config, last))
    assert last == run.config.train.steps or run.config.train.stop_after_drop > 0 or "stopped" in run.summary


def test_the_default_build_reads_only_shipped_runs():
    """From a fresh clone the book trains nothing: every run the cpu plan names is shipped."""
    assert [p.cfg.run_id for p in plan("cpu") if find_reference(p.cfg) is None] == []


def test_every_shipped_run_is_read_by_a_chapter():
    """No dead weight in the repository: each shipped run is in the default build's plan."""
    read = {planned.cfg.hash for planned in plan("cpu")}  # a run is found by its config, the name aside
    assert sorted(p.name for p in REFERENCE_ROOT.glob("*-*") if p.is_dir() and p.name.split("-")[-1] not in read) == []


@pytest.mark.parametrize("path", sorted(recorded_tables()), ids=lambda p: p.name)
def test_shipped_progress_tables_cover_every_checkpoint_and_match_the_shipped_ones(path):
    """A table recorded with a run holds its shipped checkpoints and agrees, at every one of them, with what
    the measuring code computes now: a change to what a measure means cannot leave the recorded tables
    behind silently (a run shipped with its metrics alone has its table checked against its schedule only)."""
    run, samples, seed = recorded_tables()[path]
    table = progress_table(run, samples=samples, seed=seed)
    assert set(run.steps) <= set(table.index) <= set(written(run.config, run.last_step))
    assert list(table.columns) == list(MEASURES)
    if not run.steps:
        return
    batch = sample_batch(run.config.data, samples, analysis_generator(seed))
    for step in run.steps:
        again = checkpoint_measures(run.checkpoint(step, attention="eager"), batch)
        assert table.loc[step].to_numpy() == pytest.approx(list(again.values()), rel=1e-4, abs=1e-6), step


def test_shipped_config_is_the_preset(shipped):
    assert shipped.drop.dropped, "a shipped model the chapters analyse must show the drop"
    assert {0, int(shipped.metrics.step.iloc[-1])} <= set(shipped.steps)


@pytest.mark.slow
def test_replaying_the_first_steps_gives_the_stored_metrics(shipped, tmp_path):
    recorded = shipped.summary["machine"]
    short = shipped.config.override({"train.steps": REPLAY_STEPS, "train.checkpoint_every": REPLAY_STEPS})
    threads = torch.get_num_threads()
    torch.set_num_threads(recorded["threads"])  # the reduction order, hence the last bits, depends on it
    folder = RunFolder(tmp_path / "replay")
    try:
        train(short, folder, progress=False)
    finally:
        torch.set_num_threads(threads)
    replay = folder.read_metrics()  # rounded as the stored table is (``folder.metrics_bytes``)
    stored = shipped.metrics.iloc[:REPLAY_STEPS].reset_index(drop=True)
    assert len(replay) == REPLAY_STEPS and replay.eval_L_mask.notna().sum() >= 1, "no evaluation replayed"
    columns = [c for c in replay.columns if c != "time_s"]
    here = machine()
    same_machine = all(recorded.get(key) == here[key] for key in ("cpu", "cpu_flags", "torch"))
    if same_machine:  # bit for bit
        pd.testing.assert_frame_equal(replay[columns], stored[columns], check_exact=True, obj=REGENERATE)
    else:  # another CPU's kernels round differently (another thread count here: 1e-6 after 200 steps)
        pd.testing.assert_frame_equal(replay[columns], stored[columns], rtol=1e-3, obj=REGENERATE)
