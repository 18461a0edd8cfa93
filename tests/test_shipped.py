"""The shipped runs (``runs/reference/``) are ours and current; the two models the chapters analyse
(the ``cpu`` 4×4 run and the ``cpu7x7`` run) replay bit for bit.

If a test here fails after a code change, the shipped run no longer matches what the code
trains: regenerate it with the command in its ``complete.json`` (also in the README).
"""

from contextlib import contextmanager

import pandas as pd
import pytest
import torch

from matcomp.analysis.progress import MEASURES, checkpoint_measures, progress_table, recorded_tables
from matcomp.book.build.plan import plan
from matcomp.data import sample_batch
from matcomp.presets import preset_config
from matcomp.runs.folder import RunFolder, metrics_bytes, read_metrics_bytes
from matcomp.runs.machine import machine
from matcomp.runs.run import Run, verify
from matcomp.runs.shipped import REFERENCE_ROOT, find_reference
from matcomp.runs.training import eval_columns, evaluate, train
from matcomp.seeding import EVAL, analysis_generator, stream

REPLAY_STEPS = 20  # training updates replayed and compared; the evaluation is checked on a shipped checkpoint
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


@contextmanager
def recorded_threads(run):
    """Torch's thread count as ``run`` recorded it: the reduction order, hence the last bits, depends on it."""
    threads = torch.get_num_threads()
    torch.set_num_threads(run.summary["machine"]["threads"])
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def assert_replayed(replay: pd.DataFrame, stored: pd.DataFrame, run) -> None:
    """Bit for bit on the machine the run was trained on; to rounding on another CPU, whose kernels round
    differently (another thread count here: 1e-6 after 200 steps)."""
    recorded, here = run.summary["machine"], machine()
    if all(recorded.get(key) == here[key] for key in ("cpu", "cpu_flags", "torch")):
        pd.testing.assert_frame_equal(replay, stored, check_exact=True, obj=REGENERATE)
    else:
        pd.testing.assert_frame_equal(replay, stored, rtol=1e-3, obj=REGENERATE)


@pytest.mark.slow
def test_replaying_the_first_steps_gives_the_stored_metrics(shipped, tmp_path):
    short = shipped.config.override({"train.steps": REPLAY_STEPS, "train.checkpoint_every": REPLAY_STEPS})
    folder = RunFolder(tmp_path / "replay")
    with recorded_threads(shipped):
        train(short, folder, progress=False)
    replay = folder.read_metrics()  # rounded as the stored table is (``folder.metrics_bytes``)
    stored = shipped.metrics.iloc[:REPLAY_STEPS].reset_index(drop=True)
    assert len(replay) == REPLAY_STEPS
    columns = [c for c in replay.columns if c != "time_s"]
    assert_replayed(replay[columns], stored[columns], shipped)


def test_evaluating_a_shipped_checkpoint_gives_its_stored_evaluation(shipped):
    """The evaluation the replay does not reach: the first shipped checkpoint at an evaluation step, evaluated
    on the batch training drew for it (the evaluation stream after the evaluations before it)."""
    cfg = shipped.config
    step = min(s for s in shipped.steps if s > 0 and s % cfg.train.eval_every == 0)
    model, generator, device = shipped.checkpoint(step), stream(cfg.train.seed, EVAL), torch.device("cpu")
    with recorded_threads(shipped):
        for _ in range(step // cfg.train.eval_every):  # the batches of the evaluations up to this one
            values = evaluate(model, cfg, generator, cfg.train.eval_batch, device)
    columns = list(eval_columns(cfg))
    replay = read_metrics_bytes(metrics_bytes(pd.DataFrame([values.tolist()], columns=columns)))  # as stored
    stored = shipped.metrics.loc[shipped.metrics.step == step, columns].reset_index(drop=True)
    assert stored.notna().all(axis=None), f"step {step} has no stored evaluation"
    assert_replayed(replay, stored, shipped)
