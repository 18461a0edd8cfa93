"""The levers a lent GPU may train the paper's model with (``matcomp.runs.engines``, ``matcomp.levers``, issue 70),
each checked here on the CPU: a compiled step takes the eager step's values to rounding, the all-ones attention
mask reaches SDPA and changes no output, a run writing fewer checkpoints seals and packs the same record, and the
bench refuses a combination whose two trainings differ and names the fastest of the rest as remote's options."""

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from matcomp.levers import Timed, choose, report, time_levers
from matcomp.main import main
from matcomp.presets import preset_config
from matcomp.remote import PACKING, deterministic, remote
from matcomp.runs.engines import Engine, engine_problem, record
from matcomp.runs.folder import RunFolder
from matcomp.runs.run import open_run
from matcomp.runs.store import get_or_train
from matcomp.runs.training import Paused, init_training
from matcomp.runs.transfer import unpack

LOSSES = ["L", "L_obs", "L_mask", "mask_value"]
TIME = ["time_s"]
CPU, CUDA = torch.device("cpu"), torch.device("cuda")


def same_weights(a: RunFolder, b: RunFolder, step: int) -> bool:
    return a.checkpoint_path(step).read_bytes() == b.checkpoint_path(step).read_bytes()


# The two tests that compile the smoke model share one worker: inductor's cache on disk then compiles its C++ once
# (about 35 s; the second test's compile then takes about 5 s)
COMPILES = pytest.mark.xdist_group("inductor")


@pytest.fixture
def scalar_cpp(monkeypatch):
    """Inductor's C++ kernels written without vector instructions: on these cores they compile in half the time
    (13.8 s against 26.5 s for the smoke model, cold), and a loan's compiled step runs Triton's kernels, not these.
    Both compiling tests take it, so the second finds the first's kernels in inductor's cache; the variable reaches
    the bench's own processes."""
    import torch._inductor.config

    monkeypatch.setattr(torch._inductor.config.cpp, "vec_isa_ok", False)
    monkeypatch.setenv("TORCHINDUCTOR_VEC_ISA_OK", "0")


@COMPILES
@pytest.mark.slow
def test_a_compiled_step_takes_the_eager_steps_values_to_rounding(tmp_path, scalar_cpp):
    cfg = preset_config("smoke").override({"train.steps": 20})
    eager = get_or_train(cfg, progress=False, root=tmp_path / "eager")
    compiled = get_or_train(cfg, progress=False, root=tmp_path / "compiled", engine=Engine("eager", compiled=True))
    assert compiled.summary["engine"] == "eager" and compiled.summary["compiled"] is True
    assert "compiled" not in eager.summary and "cublas_workspace" not in eager.summary  # a CPU run's summary as before
    pd.testing.assert_frame_equal(compiled.metrics.drop(columns=TIME), eager.metrics.drop(columns=TIME), rtol=1e-4)
    ours, theirs = load_file(compiled.folder.checkpoint_path(20)), load_file(eager.folder.checkpoint_path(20))
    assert ours.keys() == theirs.keys()  # compiling leaves the state-dict names alone
    for name, weight in ours.items():
        torch.testing.assert_close(weight, theirs[name], rtol=1e-4, atol=1e-5)


def test_the_all_ones_mask_reaches_sdpa_and_changes_no_output(micro, tmp_path, monkeypatch):
    seen = []
    real = torch.nn.functional.scaled_dot_product_attention

    def spy(*args, **kwargs):
        mask = kwargs.get("attn_mask")
        seen.append(None if mask is None else (mask.dtype, tuple(mask.shape), bool(mask.all())))
        return real(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    plain, *_ = init_training(micro, CPU)
    masked, *_ = init_training(micro, CPU, engine=Engine("eager", mask="ones"))
    ids = torch.randint(0, 8, (5, micro.data.seq_len))
    unmasked_out, masked_out = plain(ids), masked(ids)
    assert seen == [None, (torch.bool, (5, 1, 9, 9), True)]  # by default SDPA reads no mask at all
    assert torch.equal(unmasked_out, masked_out)
    cfg = micro.override({"train.steps": 20})
    runs = [get_or_train(cfg, progress=False, root=tmp_path / mask, engine=Engine("ahead", mask=mask))
            for mask in ("none", "ones")]
    assert runs[1].summary["attention_mask"] == "ones" and "attention_mask" not in runs[0].summary
    pd.testing.assert_frame_equal(runs[1].metrics[LOSSES], runs[0].metrics[LOSSES], rtol=1e-6)


def test_a_run_writing_fewer_checkpoints_has_the_same_metrics_and_bytes_and_resumes(micro, tmp_path):
    straight = get_or_train(micro, progress=False, root=tmp_path / "all")
    few = get_or_train(micro, progress=False, root=tmp_path / "few", writes=(15,))
    assert straight.steps == [0, 10, 15, 20, 30, 40] and few.steps == [15, 40]
    pd.testing.assert_frame_equal(few.metrics.drop(columns=TIME), straight.metrics.drop(columns=TIME))
    assert all(same_weights(few.folder, straight.folder, step) for step in (15, 40))
    with pytest.raises(Paused, match="step 20 of 40"):
        get_or_train(micro, progress=False, root=tmp_path / "paused", writes=(15,), stop_at=20)
    resumed = get_or_train(micro, progress=False, root=tmp_path / "paused", writes=(15,))
    assert resumed.steps == [15, 20, 40]  # the stop is written: a resume starts there
    pd.testing.assert_frame_equal(resumed.metrics.drop(columns=TIME), straight.metrics.drop(columns=TIME))
    assert same_weights(resumed.folder, straight.folder, 40)
    with pytest.raises(ValueError, match=r"writes must be checkpoints of the run; \[12\] are not"):
        get_or_train(micro, progress=False, root=tmp_path / "bad", writes=(12, 15))


def test_a_remote_run_writing_fewer_checkpoints_packs_the_same_record(tmp_path, monkeypatch):
    """At smoke (no drop: the bf16 copy keeps every checkpoint after step 0), the run written at step 100 and
    where it ends packs the metrics and the bytes of the run written at every 100 steps."""
    cfg = preset_config("smoke")
    copies = {}
    for name, writes in (("every", None), ("few", [100])):
        monkeypatch.setenv("MATCOMP_RUNS", str(tmp_path / f"machine-{name}"))
        remote(cfg, tmp_path / name, "the test's", progress=False, writes=writes)
        copies[name] = open_run(tmp_path / f"machine-{name}" / PACKING / cfg.run_id)
    trained = RunFolder(tmp_path / "machine-few" / cfg.run_id)
    assert trained.checkpoint_steps() == [100, 300] and copies["every"].steps == [100, 200, 300]
    assert copies["few"].steps == [100, 300]
    pd.testing.assert_frame_equal(copies["few"].metrics.drop(columns=TIME), copies["every"].metrics.drop(columns=TIME))
    assert all(same_weights(copies["few"].folder, copies["every"].folder, step) for step in (100, 300))
    installed = unpack([tmp_path / "few"], tmp_path / "reference").run
    assert installed.steps == [300] and same_weights(installed.folder, copies["every"].folder, 300)
    pd.testing.assert_frame_equal(installed.metrics.drop(columns=TIME), copies["every"].metrics.drop(columns=TIME))


def test_each_lever_says_why_it_cannot_train_a_run(micro):
    recipe = micro.override({"train.attention_bias": 1.0, "train.attention_bias_steps": 5})
    assert engine_problem(Engine("eager", compiled=True), micro, CPU) is None
    assert engine_problem(Engine("graph", compiled=True), micro, CUDA) is None
    assert engine_problem(Engine("ahead", compiled=True), recipe, CPU).startswith(
        "a compiled step cannot train micro-")
    assert "a mixture of sizes" in engine_problem(Engine("eager", compiled=True),
                                                  micro.override({"data.sizes": [2, 3]}), CPU)
    assert engine_problem(Engine("eager", mask="ones"), micro.override({"train.attention": "eager"}), CPU).endswith(
        "it is given to SDPA (train.attention eager adds its mask)")
    assert "model.arch gpt" in engine_problem(Engine("eager", mask="ones"), preset_config("smoke_gpt"), CPU)
    assert engine_problem(Engine("eager", mask="half"), micro, CPU) == (
        "the attention mask must be one of ('none', 'ones'); got 'half'")


def test_the_cublas_workspace_is_checked_before_training_and_recorded_on_cuda(micro, tmp_path, monkeypatch):
    monkeypatch.setenv("MATCOMP_RUNS", str(tmp_path / "store"))
    with pytest.raises(ValueError, match="the cuBLAS workspace :16384:8 is a CUDA setting; on cpu leave it at :4096:8"):
        remote(micro, tmp_path / "out", "the test's", progress=False, workspace=":16384:8")
    assert not (tmp_path / "store").exists()  # nothing trained
    with pytest.raises(ValueError, match="must read :KiB:COUNT, e.g. :4096:8; got '4096'"):
        deterministic(CPU, "4096")
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16384:8")
    assert record(Engine("graph", compiled=True), CUDA) == {"engine": "graph", "compiled": True,
                                                           "cublas_workspace": ":16384:8"}
    assert record("eager", CPU) == {"engine": "eager"}


def test_the_bench_refuses_a_combination_that_does_not_repeat_itself(micro):
    fast = Timed(Engine("graph", compiled=True), ":4096:8", setup_s=60.0, seconds=0.009, repeats=False)
    slow = Timed(Engine("graph"), ":4096:8", setup_s=5.0, seconds=0.016, repeats=True)
    compile_costs = Timed(Engine("ahead", compiled=True), ":4096:8", setup_s=600.0, seconds=0.012, repeats=True)
    wide = Timed(Engine("graph"), ":16384:8", why="the bench's budget was spent")
    assert choose([fast, slow, compile_costs, wide], 50000) == slow  # 805 s against 1,200 s; fast is refused
    assert choose([fast, slow, compile_costs, wide], 1000000) == compile_costs  # its compilation pays off
    text = report([fast, slow, wide], micro, 200)
    assert f"{'graph+compile [:4096:8]':34} REFUSED: two trainings of 200 steps differ (0.0090 s/step" in text
    assert f"{'graph [:16384:8]':34} not timed: the bench's budget was spent" in text
    assert text.endswith("fastest levers: --engine graph --attention-mask none --cublas-workspace :4096:8")
    assert report([fast], micro, 200).splitlines()[-1].startswith("no levers: no lever combination both ran and "
                                                                  "repeated itself byte for byte")


def test_the_bench_stops_at_its_budget_and_says_so(micro):
    timings = time_levers(micro, CPU, steps=5, warmup=1, budget_s=0.01, candidates=(Engine("eager"),))
    assert [(t.engine, t.workspace, t.why) for t in timings] == [
        (Engine("eager"), ":4096:8", "the bench's budget was spent"),
        (Engine("eager"), ":16384:8", "the cuBLAS workspace :16384:8 is a CUDA setting; on cpu leave it at :4096:8")]


@COMPILES
@pytest.mark.slow
def test_the_bench_at_smoke_names_the_fastest_levers_and_remote_trains_with_them(tmp_path, monkeypatch, capsys,
                                                                                   scalar_cpp):
    """What the loan's first command does, on the CPU: the bench trains each combination twice and names the
    fastest that repeats itself; remote trains with exactly those options, writing only checkpoint 100 and its
    last, and its summary records them."""
    monkeypatch.setenv("MATCOMP_RUNS", str(tmp_path / "machine"))
    main(["bench", "--preset", "smoke", "--levers", "--steps", "10", "--warmup", "2", "--device", "cpu"])
    said = capsys.readouterr().out.splitlines()
    assert any(line.startswith("  graph [:4096:8]") and line.endswith(": it needs CUDA") for line in said)
    assert any(line.startswith("  eager [:4096:8]") and line.endswith("equal byte for byte") for line in said)
    assert any(line.startswith("  ahead+compile [:4096:8]") and "s/step, setup" in line for line in said)
    assert said[-2].endswith("not timed: the cuBLAS workspace :16384:8 is a CUDA setting; on cpu leave it at :4096:8")
    assert said[-1].startswith("fastest levers: --engine ") and said[-1].endswith(" --cublas-workspace :4096:8")
    levers = said[-1].removeprefix("fastest levers: ").split()
    main(["remote", "--preset", "smoke", "--quiet", *levers, "--write-steps", "100", "--out", str(tmp_path / "out")])
    engine = Engine(levers[1], "--compile" in levers)
    assert f"trained to step 300 of 300 by the {engine} engine" in capsys.readouterr().out
    run = open_run(tmp_path / "machine" / preset_config("smoke").run_id)
    assert run.steps == [100, 300] and run.summary["engine"] == engine.name
    assert run.summary.get("compiled", False) == engine.compiled
