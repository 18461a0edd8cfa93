"""The book's runs as a plan, trained in parallel on a local Ray instance (2 CPUs, tiny runs)."""

import os
import re
import time

import pandas as pd
import pytest
import torch

from matcomp.book.build.plan import plan, plan_table
from matcomp.book.chapters import CHAPTERS, chapter_spec
from matcomp.main import main
from matcomp.runs.cost import CostBook
from matcomp.runs.parallel import train_all
from matcomp.runs.store import ENV_NO_TRAINING, get_or_train, locate, runs_root

ray = pytest.importorskip("ray")  # the instance is conftest.py's local_ray, shared with the sweep's Ray test
pytestmark = pytest.mark.xdist_group("ray")  # with test_sweep.py's: on one test worker, so Ray starts once


def finished_at(root, cfg) -> float:
    return (root / cfg.run_id / "complete.json").stat().st_mtime_ns


def test_a_plan_trains_each_run_once_and_leaves_a_stored_run_alone(local_ray, micro, store):
    configs = [micro.override({"train.seed": s}) for s in range(3)]
    get_or_train(configs[0], progress=False)
    before = finished_at(store, configs[0])
    outcomes = train_all(configs, store)
    assert [o.run_id for o in outcomes] == [c.run_id for c in configs] and not any(o.error for o in outcomes)
    assert finished_at(store, configs[0]) == before  # loaded, not retrained
    stamps = [finished_at(store, c) for c in configs]
    train_all(configs, store)  # everything is there now: nothing trains again
    assert [finished_at(store, c) for c in configs] == stamps


def test_a_run_whose_worker_is_killed_resumes_to_the_uninterrupted_metrics(local_ray, micro, store, tmp_path):
    # killed as soon as it writes its first resume state (step 50), 950 steps before its end
    cfg = micro.override({"train.steps": 1000, "train.checkpoint_every": 50, "train.checkpoint_steps": []})
    from matcomp.runs.parallel import _train

    ref = ray.remote(_train).options(num_cpus=1, max_retries=0).remote(cfg.to_json(), str(store), 1)
    resume = store / cfg.run_id / "resume.pt"
    deadline = time.time() + 120
    while not resume.exists() and time.time() < deadline:
        time.sleep(0.2)
    ray.cancel(ref, force=True)  # kills the worker process mid-training
    with pytest.raises(Exception):
        ray.get(ref)
    assert locate(cfg, store).state()[0] == "partial"
    (outcome,) = train_all([cfg], store)
    assert outcome.error is None
    resumed = get_or_train(cfg, progress=False, root=store).metrics
    straight = get_or_train(cfg, progress=False, root=tmp_path / "other").metrics
    columns = ["step", "L", "L_obs", "L_mask", "eval_L_mask"]
    pd.testing.assert_frame_equal(resumed[columns], straight[columns])


def test_a_failing_run_is_reported_by_name_and_the_others_finish(local_ray, micro, store):
    broken = micro.override({"train.component": "position", "train.init_from": "micro-0000000000"})
    good = [micro.override({"train.seed": s}) for s in (5, 6)]
    outcomes = {o.run_id: o for o in train_all([good[0], broken, good[1]], store)}
    assert "init_from" in outcomes[broken.run_id].error and "micro-0000000000" in outcomes[broken.run_id].error
    assert all(outcomes[c.run_id].error is None and locate(c, store).state()[0] == "stored" for c in good)


def test_the_paper_plan_lists_runs_of_the_papers_shapes_without_training(store):
    planned = plan("paper")
    assert {p.cfg.model.hidden for p in planned} >= {64, 768, 1024}
    # the paper's runs, and the default preset's that four chapters' prose quotes at every preset (ChapterSpec.quoted)
    assert {p.cfg.name for p in planned} == {"paper", "paper_gpt", "cpu", "cpu7x7", "cpu_gpt"}
    main_run = next(p for p in planned if p.cfg.model == plan("paper", ["copying_phase"])[0].cfg.model)
    assert (main_run.cfg.data.n_rows, main_run.cfg.data.rank, main_run.cfg.train.lr) == (7, 2, 1e-4)
    table = plan_table(planned, store, CostBook(store, torch.device("cpu"), 1))
    own = table.index.isin([cfg.run_id for name in CHAPTERS for cfg in chapter_spec(name).runs("paper")])
    assert set(table.state[own]) == {"missing"} and (table["seconds left"][own] > 0).all()
    assert set(table.state[~own]) == {"shipped"}  # the quoted runs: read, never trained
    assert not any(store.glob("paper-*"))  # nothing trained, nothing started
    with pytest.raises(ValueError, match="chapters must be among"):
        plan("paper", ["nope"])


def test_plan_command_prints_every_run_with_state_and_cost(capsys):
    main(["plan", "--preset", "cpu"])
    out = capsys.readouterr().out
    assert "cpu-f603ff8bc5" in out and "shipped" in out and "the whole plan from scratch" in out
    assert len(plan("cpu")) == len(re.findall(r"^\w+-[0-9a-f]{10}\b", out, re.M))  # a line per run


@pytest.mark.slow
def test_after_prepare_the_smoke_chapters_train_nothing(local_ray, monkeypatch, tmp_path):
    """``prepare`` trains a chapter's smoke plan on Ray (into the session's store); the chapter executed with
    training forbidden then runs through. One chapter's plan (``--chapter``), not the book's 41 runs: the other
    chapters train theirs as they are executed, and executing one checks what executing two did (the other was
    ``components``, which nbmake executes too). ``copying_phase``: two runs, and no explorer to draw (``sudden_drop``,
    the chapter this was, took 15 s at smoke, 6 of them its explorer's pictures; JupyterLab's test runs it)."""
    main(["prepare", "--preset", "smoke", "--chapter", "copying_phase", "--quiet"])
    planned = plan("smoke", ["copying_phase"])
    assert len(planned) >= 2 and {locate(p.cfg, runs_root()).state()[0] for p in planned} <= {"stored", "shipped"}
    papermill = pytest.importorskip("papermill")
    monkeypatch.setenv(ENV_NO_TRAINING, "1")
    book = os.path.join(os.path.dirname(__file__), "..", "book")
    assert chapter_spec("copying_phase").runs("smoke")
    papermill.execute_notebook(f"{book}/copying_phase.ipynb", str(tmp_path / "copying_phase.ipynb"),
                               parameters={"preset": "smoke"}, cwd=book, progress_bar=False)


def test_without_prepare_a_forbidden_training_names_the_run(micro, store, monkeypatch):
    monkeypatch.setenv(ENV_NO_TRAINING, "1")
    with pytest.raises(RuntimeError, match=f"run {micro.run_id} is not in the store"):
        get_or_train(micro, progress=False)


def test_the_ray_tests_are_one_xdist_group_on_one_worker(request):
    """pytest-xdist sends the tests of a group to one worker (one Ray start), by the suffix it gives their ids."""
    if not hasattr(request.config, "workerinput") or not request.config.getvalue("loadgroup"):
        pytest.skip("run without pytest-xdist's --dist loadgroup")
    assert request.node.nodeid.endswith("@ray")
