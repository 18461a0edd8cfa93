"""Training, exact resume and the run store, on a micro config that trains in about a second."""

import multiprocessing as mp
import os

import pandas as pd
import pytest
import torch

import matcomp.runs.training
from matcomp.presets import preset_config
from matcomp.runs.extend import extendable
from matcomp.runs.folder import RunFolder, atomic_write_bytes, checkpoint_metadata
from matcomp.runs.run import open_run
from matcomp.runs.store import get_or_train, locate

TIME = ["time_s"]


def test_loss_goes_down_and_run_has_everything(micro, store):
    run = get_or_train(micro, progress=False)
    m = run.metrics
    assert list(m.step) == list(range(1, 41))
    assert m.L.iloc[-10:].mean() < 0.3 * m.L.iloc[:3].mean()
    assert m.L_obs.iloc[-5:].mean() < m.L_mask.iloc[-5:].mean()  # copying comes first
    assert m.eval_L.notna().sum() == 4 and m.eval_L.notna().tolist()[9]  # eval every 10 steps
    assert run.steps == [0, 10, 15, 20, 30, 40]
    assert run.path.name == micro.run_id and run.config == micro
    model = run.checkpoint(40)
    assert not model.training and model.attention == "sdpa"
    assert run.checkpoint(10, attention="eager").attention == "eager"
    with pytest.raises(ValueError, match="no checkpoint at step 12"):
        run.checkpoint(12)
    assert run.nearest_step(12) == 10 and run.nearest_step(3) == 0 and run.nearest_step(3, trained=True) == 10


def test_a_checkpoint_sealed_into_the_wrong_run_is_named(micro, store):
    """A checkpoint of another model written into a run, and sealed (complete.json re-fingerprinted), passes
    every size and SHA-256 check: its own metadata is what catches it."""
    from matcomp.runs.run import verify

    run = get_or_train(micro, progress=False)
    other = micro.override({"model.hidden": micro.model.hidden * 2})
    from matcomp.models.factory import build_model

    run.folder.write_checkpoint(20, build_model(other.model, seed=0).state_dict(), other)
    run.folder.write_complete({**run.summary, **run.folder.fingerprint()})
    name = run.folder.checkpoint_path(20).name
    assert verify(run.folder, micro) == (f"{name} holds the weights of another model, task or step than the run's "
                                         f"(its metadata: step 20, {other.model}, {other.data})")


def test_a_checkpoint_file_alone_says_which_model_it_holds(micro, store, tmp_path):
    import shutil

    from safetensors.torch import load_file

    from matcomp.models.factory import build_model

    run = get_or_train(micro, progress=False)
    lone = shutil.copy(run.folder.checkpoint_path(20), tmp_path / "lone.safetensors")  # no config.json beside it
    model_cfg, data_cfg, step = checkpoint_metadata(lone)
    assert (model_cfg, data_cfg, step) == (micro.model, micro.data, 20)
    assert [checkpoint_metadata(run.folder.checkpoint_path(s))[2] for s in run.steps] == run.steps
    model = build_model(model_cfg, seed=0)
    model.load_state_dict(load_file(lone))
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), run.checkpoint(20).state_dict().values()))


def test_second_request_loads_instead_of_training(micro, store, monkeypatch):
    first = get_or_train(micro, progress=False)
    stamp = first.folder.complete_path.stat().st_mtime_ns
    monkeypatch.setattr("matcomp.runs.store.train", lambda *a, **k: pytest.fail("trained twice"))
    second = get_or_train(micro.override({"name": "micro"}), progress=False)
    assert second.path == first.path and second.folder.complete_path.stat().st_mtime_ns == stamp


def test_resume_after_a_crash_is_identical_to_an_uninterrupted_run(micro, tmp_path, monkeypatch):
    whole = get_or_train(micro, progress=False, root=tmp_path / "a")

    calls = {"n": 0}
    real = matcomp.runs.training.sample_batch

    def crash_at_step_27(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 27 + 2:  # 27 training batches plus the evals at steps 10 and 20
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(matcomp.runs.training, "sample_batch", crash_at_step_27)
    with pytest.raises(KeyboardInterrupt):
        get_or_train(micro, progress=False, root=tmp_path / "b")
    folder = RunFolder(tmp_path / "b" / micro.run_id)
    assert folder.read_resume()["step"] == 20 and not folder.complete_path.exists()
    assert folder.resume_step() == 20 and locate(micro, tmp_path / "b").state() == ("partial", 20)  # weights not loaded
    assert RunFolder(tmp_path / "none").resume_step() is None
    monkeypatch.setattr(matcomp.runs.training, "sample_batch", real)

    resumed = get_or_train(micro, progress=False, root=tmp_path / "b")
    pd.testing.assert_frame_equal(resumed.metrics.drop(columns=TIME), whole.metrics.drop(columns=TIME))
    for step in whole.steps:
        a, b = whole.folder.read_checkpoint(step), resumed.folder.read_checkpoint(step)
        assert all(torch.equal(a[k], b[k]) for k in a)
    assert resumed.folder.read_resume()["step"] == 40  # kept, so that a longer budget continues it


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_run_stopped_on_the_cpu_continues_on_cuda_with_the_same_batches(micro, tmp_path, monkeypatch):
    real = matcomp.runs.training.sample_batch
    drawn: dict[str, list[torch.Tensor]] = {"cpu": [], "cuda": []}

    def recorded(into):
        def sample(*args, **kwargs):
            batch = real(*args, **kwargs)
            drawn[into].append(batch.ids.cpu())
            return batch
        return sample

    monkeypatch.setattr(matcomp.runs.training, "sample_batch", recorded("cpu"))
    whole = get_or_train(micro, progress=False, root=tmp_path / "a", device="cpu")
    monkeypatch.setattr(matcomp.runs.training, "sample_batch", real)
    get_or_train(micro.override({"train": {"steps": 20}}), progress=False, root=tmp_path / "b", device="cpu")
    monkeypatch.setattr(matcomp.runs.training, "sample_batch", recorded("cuda"))
    resumed = get_or_train(micro, progress=False, root=tmp_path / "b", device="cuda")
    assert len(drawn["cuda"]) == 20 + 2  # steps 21-40 and the evals at 30 and 40
    assert all(torch.equal(a, b) for a, b in zip(drawn["cpu"][-22:], drawn["cuda"]))
    assert resumed.metrics.L.iloc[-5:].mean() == pytest.approx(whole.metrics.L.iloc[-5:].mean(), rel=0.05)


def test_damaged_run_is_moved_aside_and_redone(micro, store):
    run = get_or_train(micro, progress=False)
    path = run.folder.checkpoint_path(20)
    path.write_bytes(path.read_bytes()[:100])  # truncated file
    with pytest.raises(ValueError, match="wrong size"):
        open_run(run.path)
    with pytest.warns(UserWarning, match="cannot be used"):
        again = get_or_train(micro, progress=False)
    assert open_run(again.path).steps == run.steps
    broken = [p for p in store.iterdir() if ".broken-" in p.name]
    assert len(broken) == 1 and (broken[0] / "checkpoints" / path.name).stat().st_size == 100


@pytest.mark.parametrize("damaged", ["checkpoints/step_000020.safetensors", "metrics.parquet"])
def test_a_same_size_change_moves_a_stored_run_aside(micro, store, damaged):
    run = get_or_train(micro, progress=False)
    weights = {k: v for k, v in run.folder.read_complete()["sha256"].items() if k.startswith("checkpoints/")}
    data = bytearray((run.path / damaged).read_bytes())
    data[-64:] = bytes((b + 1) % 256 for b in data[-64:])  # the last 64 bytes changed, the size kept
    (run.path / damaged).write_bytes(bytes(data))
    with pytest.raises(ValueError, match="SHA-256 differs"):
        open_run(run.path)
    with pytest.warns(UserWarning, match="has changed since the run finished"):
        again = get_or_train(micro, progress=False)
    redone = open_run(again.path).summary["sha256"]
    assert {k: v for k, v in redone.items() if k.startswith("checkpoints/")} == weights  # retrained to the same bytes
    assert len([p for p in store.iterdir() if ".broken-" in p.name]) == 1


def test_folder_with_another_config_is_never_loaded(micro, store):
    run = get_or_train(micro, progress=False)
    other = micro.override({"train.lr": 1e-3})
    run.folder.write_config(other)  # as if a hash collided or someone edited the file
    with pytest.warns(UserWarning, match="differs"):
        again = get_or_train(micro, progress=False)
    assert again.config == micro


def test_interrupted_write_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "metrics.csv"
    atomic_write_bytes(target, b"old")

    def fail(*args):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError):
        atomic_write_bytes(target, b"new")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.csv"]  # no temporary left behind


def _train_in_child(cfg_json, root, queue):
    from matcomp.config import RunConfig

    run = get_or_train(RunConfig.from_json(cfg_json), progress=False, root=root)
    queue.put(run.folder.complete_path.stat().st_mtime_ns)


def test_two_processes_train_a_run_once(micro, tmp_path):
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_train_in_child, args=(micro.to_json(), str(tmp_path), queue)) for _ in range(2)]
    for p in procs:
        p.start()
    stamps = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert stamps[0] == stamps[1]  # the second process found the first one's finished run
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith(".")] == [micro.run_id]


def test_bf16_autocast_trains(micro, store):
    run = get_or_train(micro.override({"train.precision": "bf16", "train.steps": 20}), progress=False)
    m = run.metrics
    assert m.L.notna().all() and m.L.iloc[-5:].mean() < 0.5 * m.L.iloc[:3].mean()
    assert run.checkpoint(20).readout.weight.dtype == torch.float32  # weights stay fp32


def test_tf32_turns_on_tf32_matmuls_for_the_whole_step_and_is_fp32_on_a_cpu(micro, store, monkeypatch):
    seen = []
    step = matcomp.runs.training.train_step

    def spy(*args):  # the setting in force while the step runs its forward and backward passes
        seen.append(torch.backends.cuda.matmul.allow_tf32)
        return step(*args)

    monkeypatch.setattr(matcomp.runs.training, "train_step", spy)
    torch.backends.cuda.matmul.allow_tf32 = True  # a global setting an fp32 run must not inherit
    try:
        fp32 = get_or_train(micro.override({"train.steps": 20}), progress=False)
        assert seen == [False] * 20 and torch.backends.cuda.matmul.allow_tf32  # put back afterwards
        tf32 = get_or_train(micro.override({"train.steps": 20, "train.precision": "tf32"}), progress=False)
        assert seen[20:] == [True] * 20
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False
    assert tf32.config.run_id != fp32.config.run_id
    pd.testing.assert_frame_equal(tf32.metrics.drop(columns="time_s"), fp32.metrics.drop(columns="time_s"))


def test_stop_after_drop_ends_at_the_first_settled_checkpoint_and_resumes_there(micro, tmp_path, monkeypatch):
    cfg = micro.override({"train.stop_after_drop": 100})
    monkeypatch.setattr(matcomp.runs.training, "drop_settled", lambda table, after, level: table.step.max() >= 20)
    run = get_or_train(cfg, progress=False, root=tmp_path / "a")
    assert run.last_step == 20 and run.metrics.step.max() == 20 and run.steps == [0, 10, 15, 20]
    assert open_run(run.path).summary["files"]  # complete and verified
    assert cfg.run_id != micro.run_id  # a run that stops is another run

    # a crash after the stopping checkpoint was saved, before complete.json: the resume trains nothing more
    folder = RunFolder(tmp_path / "b" / cfg.run_id)
    real_save = matcomp.runs.training._save

    def crash_after_saving_20(folder, cfg, model, optimizer, train_gen, eval_gen, step, *rest, **options):
        real_save(folder, cfg, model, optimizer, train_gen, eval_gen, step, *rest, **options)
        if step == 20:
            raise KeyboardInterrupt
    monkeypatch.setattr(matcomp.runs.training, "_save", crash_after_saving_20)
    with pytest.raises(KeyboardInterrupt):
        get_or_train(cfg, progress=False, root=tmp_path / "b")
    monkeypatch.setattr(matcomp.runs.training, "_save", real_save)
    resumed = get_or_train(cfg, progress=False, root=tmp_path / "b")
    assert folder.complete_path.exists() and resumed.last_step == 20
    pd.testing.assert_frame_equal(resumed.metrics.drop(columns=TIME), run.metrics.drop(columns=TIME))


def test_stop_after_drop_rejects_a_window_it_cannot_read(micro):
    with pytest.raises(ValueError, match="train.stop_after_drop"):
        micro.override({"train.stop_after_drop": 30})


def test_a_longer_budget_continues_a_finished_run_exactly(micro, tmp_path, monkeypatch):
    short = micro  # 40 steps, a checkpoint every 10 and at 15 (the smoke preset's 300 and 600 tested the same, 11 s)
    longer = short.override({"train.steps": 80})
    whole = get_or_train(longer, progress=False, root=tmp_path / "a")
    get_or_train(short, progress=False, root=tmp_path / "b")
    steps = []
    real = matcomp.runs.training.train_step
    monkeypatch.setattr(matcomp.runs.training, "train_step", lambda *a: steps.append(1) or real(*a))
    extended = get_or_train(longer, progress=False, root=tmp_path / "b")
    assert len(steps) == 40 and extended.summary["extended_from"] == short.run_id
    pd.testing.assert_frame_equal(extended.metrics.drop(columns=TIME), whole.metrics.drop(columns=TIME))
    assert set(whole.steps) <= set(extended.steps)
    for step in whole.steps:
        a, b = whole.folder.read_checkpoint(step), extended.folder.read_checkpoint(step)
        assert all(torch.equal(a[k], b[k]) for k in a)
    assert open_run(tmp_path / "b" / short.run_id).metrics.step.max() == 40  # the shorter run is kept whole
    assert locate(longer.override({"train.steps": 120}), tmp_path / "b").state() == ("partial", 80)


def test_a_chapters_announcement_counts_the_steps_a_continued_run_has_left(micro, tmp_path, monkeypatch, capsys):
    """The chapter's training announcement reads the run store's one prediction (``locate``): a longer
    budget of a finished run announces only the steps past it, as ``get_or_train`` then trains them."""
    from matcomp.book.chapter import announce_training

    monkeypatch.setenv("MATCOMP_RUNS", str(tmp_path))
    get_or_train(micro, progress=False, root=tmp_path)
    longer = micro.override({"train.steps": micro.train.steps * 3})
    assert locate(longer, tmp_path).state() == ("partial", micro.train.steps)
    assert announce_training(locate(longer, tmp_path), "smoke") is True
    assert f"({2 * micro.train.steps:,} steps, about" in capsys.readouterr().out
    assert announce_training(locate(micro, tmp_path), "smoke") is False  # stored: nothing to say


def test_a_run_stopped_after_its_drop_continues_to_a_later_stop_exactly(micro, tmp_path, monkeypatch):
    # the drop "settles" at step 20 for a 100-step window only: the 100 run stops there, the others do not
    monkeypatch.setattr(matcomp.runs.training, "drop_settled", lambda table, after, level: after == 100
                        and table.step.max() >= 20)
    stopped = micro.override({"train.stop_after_drop": 100})
    base = get_or_train(stopped, progress=False, root=tmp_path / "b")
    assert base.last_step == 20 < stopped.train.steps
    for later in (stopped.override({"train.stop_after_drop": 200}), stopped.override({"train.stop_after_drop": 0})):
        assert extendable(later, tmp_path / "b").path == base.path
    assert extendable(stopped.override({"train.steps": 60}), tmp_path / "b") is None  # it would stop at 20 again
    longer = stopped.override({"train.stop_after_drop": 200})
    whole = get_or_train(longer, progress=False, root=tmp_path / "a")
    extended = get_or_train(longer, progress=False, root=tmp_path / "b")
    assert extended.summary["extended_from"] == stopped.run_id and extended.last_step == whole.last_step == 40
    pd.testing.assert_frame_equal(extended.metrics.drop(columns=TIME), whole.metrics.drop(columns=TIME))
    a, b = whole.folder.read_checkpoint(40), extended.folder.read_checkpoint(40)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_run_is_not_continued_from_a_tampered_state_or_another_config(tmp_path):
    short = preset_config("smoke").override({"train.steps": 120, "train.checkpoint_every": 60})
    base = get_or_train(short, progress=False, root=tmp_path)
    assert extendable(short.override({"train.steps": 240}), tmp_path).path == base.path
    assert extendable(short.override({"train.steps": 240, "train.lr": 2e-3}), tmp_path) is None
    assert extendable(short.override({"train.steps": 100}), tmp_path) is None
    assert extendable(short.override({"train.steps": 240, "train.stop_after_drop": 100}), tmp_path) is None
    state = bytearray(base.folder.resume_path.read_bytes())
    state[-8:] = bytes(8)
    base.folder.resume_path.write_bytes(bytes(state))
    assert extendable(short.override({"train.steps": 240}), tmp_path) is None


def test_a_run_of_another_architecture_in_the_store_is_no_base(tmp_path):
    get_or_train(preset_config("smoke_gpt").override({"train.steps": 20, "train.checkpoint_every": 10}), progress=False,
                 root=tmp_path)
    assert extendable(preset_config("smoke").override({"train.stop_after_drop": 100}), tmp_path) is None


def test_the_ahead_engine_takes_the_same_steps_on_the_same_batches_and_resumes_exactly(micro, tmp_path):
    """``ahead`` differs from ``eager`` only in how a batch reaches the device and in Adam's fused kernel: the
    same batches, the same losses to rounding, and an exact resume of its own."""
    eager = get_or_train(micro, progress=False, root=tmp_path / "eager")
    ahead = get_or_train(micro, progress=False, root=tmp_path / "ahead", engine="ahead")
    assert ahead.summary["engine"] == "ahead" and eager.summary["engine"] == "eager"
    losses = ["L", "L_obs", "L_mask"]
    assert not ahead.metrics[losses].equals(eager.metrics[losses])  # another Adam kernel: not the same bits
    pd.testing.assert_frame_equal(ahead.metrics[losses], eager.metrics[losses], rtol=1e-3)
    with pytest.raises(matcomp.runs.training.Paused, match="step 15 of 40"):
        get_or_train(micro, progress=False, root=tmp_path / "resumed", engine="ahead", stop_at=15)
    resumed = get_or_train(micro, progress=False, root=tmp_path / "resumed", engine="ahead")
    pd.testing.assert_frame_equal(resumed.metrics.drop(columns=TIME), ahead.metrics.drop(columns=TIME))


def test_stop_at_must_be_a_checkpoint_and_the_graph_engine_says_why_it_cannot_run(micro, tmp_path):
    with pytest.raises(ValueError, match=r"stop_at must be one of the run's checkpoints after step 0; got 12, "
                                         r"and micro-\w+ checkpoints at \[10, 15, 20, 30, 40\]"):
        get_or_train(micro, progress=False, root=tmp_path, stop_at=12)
    with pytest.raises(ValueError, match="the graph engine cannot train micro-\\w+ on cpu: it needs CUDA"):
        get_or_train(micro, progress=False, root=tmp_path, engine="graph")
    problem = matcomp.runs.training.engine_problem
    cuda = torch.device("cuda")
    assert problem("graph", micro, cuda) is None
    assert problem("turbo", micro, cuda) == "engine must be one of ('eager', 'ahead', 'graph'); got 'turbo'"
    recipe = micro.override({"train.attention_bias": 1.0, "train.attention_bias_steps": 5, "train.precision": "bf16"})
    assert problem("graph", recipe, cuda).endswith(
        "the recipe's attention hooks change by step (train.attention_bias, train.attention_scale); "
        "bf16 autocast caches its casts (train.precision bf16)")
    assert "a mixture of sizes" in problem("graph", micro.override({"data.sizes": [2, 3]}), cuda)
    assert not list(tmp_path.glob("micro-*/checkpoints/*"))  # refused before any training


def test_a_run_that_need_not_resume_writes_its_resume_state_only_where_it_stops(micro, tmp_path, monkeypatch):
    written = []
    real = RunFolder.write_resume
    monkeypatch.setattr(RunFolder, "write_resume",
                        lambda self, state: written.append(state["step"]) or real(self, state))
    run = get_or_train(micro, progress=False, root=tmp_path / "a", resumable=False)
    assert written == [40] and run.steps == [0, 10, 15, 20, 30, 40]
    straight = get_or_train(micro, progress=False, root=tmp_path / "b")
    pd.testing.assert_frame_equal(run.metrics.drop(columns=TIME), straight.metrics.drop(columns=TIME))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="a CUDA graph needs a GPU (scripts/paper_on_gpu.sh runs it)")
def test_the_graph_engine_replays_the_steps_of_the_ahead_engine(micro, tmp_path):
    ahead = get_or_train(micro, progress=False, root=tmp_path / "ahead", device="cuda", engine="ahead")
    graph = get_or_train(micro, progress=False, root=tmp_path / "graph", device="cuda", engine="graph")
    losses = ["L", "L_obs", "L_mask"]
    pd.testing.assert_frame_equal(graph.metrics[losses], ahead.metrics[losses], rtol=1e-4, atol=1e-6)
