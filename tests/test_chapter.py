import dataclasses

import numpy as np
import pandas as pd
import pytest

from matcomp.analysis.phases import phases
from matcomp.analysis.shortening import arm_summary, shortening_defaults
from matcomp.book.build.plan import plan
from matcomp.book.chapter import chapter_config, model_preset
from matcomp.book.phase_notes import phase_note, phases_text
from matcomp.overrides import parse_overrides
from matcomp.presets import preset_config
from matcomp.runs.folder import RunFolder
from matcomp.runs.run import Run


def test_parameters_resolve_from_arguments_then_environment_then_default(monkeypatch):
    for name in ("MATCOMP_PRESET", "MATCOMP_SEED", "MATCOMP_SET"):
        monkeypatch.delenv(name, raising=False)
    assert chapter_config() == preset_config("cpu")
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
    assert chapter_config("paper12", variant="gpt").name == "paper_gpt"  # the 12-layer scale's GPT is the paper's
    with pytest.raises(ValueError, match="variant must be '' or 'gpt'; got 'gtp'"):
        chapter_config(variant="gtp")


@pytest.mark.parametrize("preset", ["smoke", "cpu", "paper", "paper12"])
def test_every_chapter_names_its_runs_at_every_scale_of_the_book(preset):
    from matcomp.book.build.plan import plan

    planned = plan(preset)
    assert planned and {"gpt"} <= {chapter for p in planned for chapter in p.chapters}


def test_the_default_runs_a_chapters_prose_quotes_are_in_every_presets_plan_and_are_shipped(monkeypatch):
    from matcomp.book.chapters import CHAPTERS, chapter_spec
    from matcomp.runs.store import locate

    monkeypatch.setenv("MATCOMP_SEED", "3")  # the quoted runs are the default preset's own, whatever a reader sets
    quoted = {name: chapter_spec(name).quoted() for name in CHAPTERS if chapter_spec(name).quoted}
    assert set(quoted) == {"progress", "shortening", "sizes_ranks", "gpt"}
    assert len(quoted["shortening"]) == 4 * 7 + 4  # plain and six arms at 4 seeds, and the seeds' progress twins
    for name in ("smoke", "paper"):
        readers = {p.cfg.run_id: p.chapters for p in plan(name)}
        for chapter, configs in quoted.items():
            assert all(chapter in readers[cfg.run_id] for cfg in configs), (name, chapter)
    assert {locate(cfg).state()[0] for configs in quoted.values() for cfg in configs} == {"shipped"}  # none trains


def test_one_model_chapters_read_the_larger_run_at_cpu_and_their_seeds_stay_on_the_scale(monkeypatch):
    monkeypatch.delenv("MATCOMP_PRESET", raising=False)
    assert model_preset() == "cpu7x7" and model_preset("smoke") == "smoke" and model_preset("paper") == "paper"
    assert model_preset(None, "cpu") == "cpu"  # the chapter's model parameter wins
    large, small = preset_config("cpu7x7"), preset_config("cpu")
    # the cpu model with the paper's 8 heads (4 stall 4.4x below the plateau at 7x7)
    assert (large.data.n_rows, large.data.n_cols, large.model) == (7, 7, dataclasses.replace(small.model, heads=8))
    readers = {p.cfg.hash: set(p.chapters) for p in plan("cpu")}
    assert {"copying_phase", "head_taxonomy", "probing", "sudden_drop"} <= readers[large.hash]
    assert {"sudden_drop", "head_taxonomy", "embeddings"} <= readers[small.hash]  # drop steps, families, clusters
    assert "copying_phase" not in readers[small.hash]


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match="FIELD=VALUE"):
        parse_overrides("train.lr")
    with pytest.raises(ValueError, match="preset must be one of"):
        chapter_config("huge")
    with pytest.raises(ValueError, match="unknown config key 'train.speed'"):
        chapter_config("smoke", overrides="train.speed=2")


def fake_run(tmp_path, l_mask: np.ndarray, steps: list[int], name: str = "smoke") -> Run:
    cfg = preset_config(name).override({"train.steps": len(l_mask), "train.checkpoint_every": 100,
                                 "train.eval_every": 1, "train.checkpoint_steps": ()})
    folder = RunFolder(tmp_path / cfg.run_id)  # a run folder is named by its run id
    folder.write_config(cfg)
    step = np.arange(1, len(l_mask) + 1)
    folder.write_metrics(pd.DataFrame({"step": step, "L": l_mask, "L_obs": 1e-4, "L_mask": l_mask,
                                       "mask_value": 0.0, "time_s": np.nan}))
    for s in steps:
        folder.write_checkpoint(s, {}, cfg)
    folder.write_complete(folder.fingerprint())
    return Run(folder.path)


def test_phases_follow_the_drop(tmp_path):
    l_mask = np.where(np.arange(1, 4001) < 2000, 0.11, 0.01)
    run = fake_run(tmp_path, l_mask, [0, 500, 1000, 1500, 1900, 2100, 3000, 4000])
    p = phases(run)
    assert p.dropped and p.plateau == (500, 1000, 1500, 1900) and p.post == 4000
    drop = run.drop.half_step  # ~1950: the paper's 4,000 of 15,000 is 0.27 of it, ~520
    assert p.pre == 500 and p.copy_steps == (500, 1900)  # 0.07, 0.27, 0.93 of the drop, nearest checkpoints
    text = " ".join(phases_text(run, p).split())
    assert f"at step {drop}" in text and "fractions" in text
    paper_run = fake_run(tmp_path, l_mask, [0, 500, 1000, 1500, 1900, 2100, 3000, 4000], name="paper")
    paper = phases(paper_run)
    # a run of the paper's preset: its own steps 4,000 and 1,000 / 4,000 / 14,000, whoever opens it
    assert paper.pre == 4000 and paper.copy_steps == (1000, 4000)
    assert "the paper's steps" in " ".join(phases_text(paper_run, paper).split())


def test_a_pre_shift_checkpoint_far_from_its_target_is_said_so_with_what_it_reads(tmp_path):
    l_mask = np.where(np.arange(1, 8001) < 4000, 0.11, 0.01)  # drop at 4,005: the pre-shift target 1,068
    sparse = fake_run(tmp_path, l_mask, [0, 250, 2750, 4000, 8000])  # no checkpoint kept between 250 and 2,750
    note = " ".join(phase_note(sparse, phases(sparse)).split())
    assert note.startswith(" ".join(phases_text(sparse, phases(sparse)).split()))  # the phases' text, then why 250
    assert "Step 250 lies 818 steps from step 1,068: the run kept no checkpoint between steps 250 and 2,750" in note
    assert note.endswith("reads step 250, where its smoothed L_mask is 1.00× its plateau: a copying model, as a "
                         "pre-shift one is.")
    dense = fake_run(tmp_path / "dense", l_mask, [0, 250, 1000, 2750, 4000, 8000])
    assert phase_note(dense, phases(dense)) == phases_text(dense, phases(dense))  # 1,000: near its target


def test_phases_without_a_drop_say_so(tmp_path):
    run = fake_run(tmp_path, np.full(600, 0.11), [0, 200, 400, 600])
    p = phases(run)
    assert not p.dropped and p.plateau == (200, 400, 600) and p.post == 600
    assert "no drop" in phases_text(run, p)


def test_shortening_arms_run_the_full_steps_and_stop_after_their_drop():
    cpu = shortening_defaults(preset_config("cpu"), after_drop=2000)
    assert list(cpu) == ["attention × 10 (follow-up)", "bias, fading", "bias, fading, no diagonal", "bias, kept on",
                         "bias, kept on, no diagonal", "lr × 2"]
    assert all(change["train.stop_after_drop"] == 2000 and "train.steps" not in change for change in cpu.values())
    scale = preset_config("cpu").override(cpu["attention × 10 (follow-up)"]).train
    assert (scale.attention_scale, scale.attention_scale_from, scale.attention_diagonal) == (10.0, 500, False)
    fading = preset_config("cpu").override(cpu["bias, fading"]).train
    assert (fading.attention_bias, fading.attention_bias_steps, fading.attention_diagonal) == (2.0, 4000, True)
    kept = preset_config("cpu").override(cpu["bias, kept on, no diagonal"]).train
    assert (kept.attention_bias_schedule, kept.attention_bias_steps, kept.attention_diagonal) == ("constant", 0, False)
    assert cpu["lr × 2"]["train.lr"] == 2 * preset_config("cpu").train.lr
    smoke = preset_config("smoke").override(shortening_defaults(preset_config("smoke"), after_drop=100)["bias, fading"])
    assert (smoke.train.attention_bias_steps, smoke.train.steps) == (60, 300)


def test_arm_summary_counts_censored_seeds_as_later_and_keeps_them_out_of_the_spread():
    plain = pd.DataFrame({"drop step": pd.array([5000, 6500, 11000, None], dtype="Int64")}, index=[0, 1, 2, 3])
    faster = pd.DataFrame({"drop step": pd.array([3000, 3500, 9000, 15000], dtype="Int64")}, index=[0, 1, 2, 3])
    slower = pd.DataFrame({"drop step": pd.array([6000, None, 12000, None], dtype="Int64")}, index=[0, 1, 2, 3])
    summary = arm_summary(plain, {"faster": faster, "slower": slower}, budget=20000)
    assert list(summary.index) == ["plain", "faster", "slower"]
    assert summary.loc["plain", "dropped"] == "3/4" and summary.loc["plain", "max"] == 11000
    # the reference row says what it is where a comparison would stand, not "nan"
    assert summary.loc["plain", ["earlier than plain", "outcome"]].tolist() == ["—", "the reference of the others"]
    assert list(summary.columns[-4:]) == ["earlier than plain", "mean change", "both dropped", "outcome"]
    faster_row = summary.loc["faster"]
    assert faster_row["earlier than plain"] == "4/4" and faster_row["outcome"] == "earlier on every seed"
    assert faster_row["mean change"] == pytest.approx(np.mean([-2000, -3000, -2000]))  # seeds where both drop
    assert summary.loc["slower", "dropped"] == "2/4" and summary.loc["slower", "mean"] == 9000
    assert summary.loc["slower", "earlier than plain"] == "0/4"
    assert summary.loc["slower", "outcome"] == "earlier on 0, later on 3 of 4 seeds"  # seed 3: neither drops
    assert faster_row["both dropped"] == 3 and summary.loc["slower", "both dropped"] == 2  # what the mean is over
    assert summary.loc["slower", "sd"] == pytest.approx(np.std([6000, 12000], ddof=1))
    never = pd.DataFrame({"drop step": pd.array([None] * 4, dtype="Int64")}, index=[0, 1, 2, 3])
    assert arm_summary(never, {"same": never}, budget=20000).loc["same", "outcome"] == "no seed tells them apart"


def test_a_chapter_says_it_must_train_before_it_starts(store, capsys):
    from matcomp.book.chapter import open_run

    cfg = preset_config("smoke").override({"train.steps": 120})
    open_run(cfg, "smoke", with_phases=True)
    out = capsys.readouterr().out
    assert out.startswith(f"Training run {cfg.run_id} (120 steps, about ") and "s a step timed here): it is neither " \
        "shipped nor in the run store" in out
    assert "-p one_model cpu" in out and "python -m matcomp prepare --preset smoke" in out
    assert f"{cfg.run_id}: 100%" in out  # the progress bar, as text that papermill logs
    open_run(cfg, "smoke", with_phases=True)
    assert capsys.readouterr().out == ""  # stored now: nothing to say


def test_a_run_shipped_with_its_metrics_alone_serves_its_table_but_a_checkpoint_reader_trains_it(
        store, tmp_path, monkeypatch, capsys):
    import matcomp.runs.shipped
    from matcomp.book.chapter import open_run, open_runs
    from matcomp.runs.shipped import export_reference
    from matcomp.runs.store import get_or_train

    monkeypatch.setattr(matcomp.runs.shipped, "REFERENCE_ROOT", tmp_path / "reference")
    micro = preset_config("smoke").override({"train.steps": 120})
    shipped = export_reference(get_or_train(micro, progress=False, root=tmp_path / "elsewhere"), [], "python ...")
    assert open_run(micro, "smoke").path == shipped.path and capsys.readouterr().out == ""  # its metrics serve
    # a seed of a several-seed part, phases asked: read as it is, its phases None, nothing trained
    (task, seeds), = open_runs({"task": {0: micro}}, "smoke", with_phases=True).items()
    assert task == "task" and list(seeds) == [0] and seeds[0].run.path == shipped.path and seeds[0].phases is None
    assert capsys.readouterr().out == "" and not (store / micro.run_id).exists()
    run, shift = open_run(micro, "smoke", with_phases=True, metrics_only="train")  # trained into the store, announced
    assert run.path == store / micro.run_id and run.steps[0] == 0 and shift.post == run.last_step
    assert "it is shipped with its metrics alone (no checkpoint to analyse)" in capsys.readouterr().out
    with pytest.raises(ValueError, match="metrics_only must be 'read' or 'train'; got 'skip'"):
        open_run(micro, "smoke", with_phases=True, metrics_only="skip")


def test_opening_a_shipped_run_looks_it_up_once_and_hashes_its_files_once(store, tmp_path, monkeypatch):
    """The announcement and the action read one ``locate``: one search of the shipped runs, and each of its files
    hashed once, however many times the book opens it."""
    import matcomp.runs.folder
    import matcomp.runs.shipped
    import matcomp.runs.store
    from matcomp.book.chapter import open_run
    from matcomp.runs.shipped import export_reference
    from matcomp.runs.store import get_or_train

    monkeypatch.setattr(matcomp.runs.shipped, "REFERENCE_ROOT", tmp_path / "reference")
    micro = preset_config("smoke").override({"train.steps": 120})
    trained = get_or_train(micro, progress=False, root=tmp_path / "elsewhere")
    shipped = export_reference(trained, trained.steps, "python ...")
    lookups, hashed = [], []
    monkeypatch.setattr(matcomp.runs.folder, "_DIGESTS", {})
    monkeypatch.setattr(matcomp.runs.folder, "SETTLED_S", 0.0)  # settled at once (a clone's files are minutes old)
    find, digest = matcomp.runs.store.find_reference, matcomp.runs.folder.file_digest
    monkeypatch.setattr(matcomp.runs.store, "find_reference", lambda cfg: lookups.append(cfg) or find(cfg))
    monkeypatch.setattr(matcomp.runs.folder, "file_digest", lambda path, *a: hashed.append(path) or digest(path, *a))
    read_store = []
    monkeypatch.setattr(matcomp.runs.store, "extendable", lambda *a: read_store.append(a))
    run, _ = open_run(micro, "smoke", with_phases=True, metrics_only="train")
    assert run.path == shipped.path and len(lookups) == 1
    open_run(micro, "smoke", with_phases=True)
    assert len(lookups) == 2 and sorted(hashed) == shipped.folder.files()  # two openings, each file hashed once
    assert read_store == []  # a shipped run's opening never reads the working store
    with pytest.raises(ValueError, match="the location given is run smoke-"):
        matcomp.runs.store.get_or_train(micro.override({"train.seed": 9}), location=matcomp.runs.store.locate(micro))


def test_a_run_s_phases_follow_what_its_hash_covers_not_its_name():
    """The pre-shift model is at the paper's steps for a run of the paper's model, task, learning rate and batch,
    whatever its ``name`` (which its hash leaves out): two runs of one hash read the same phases. On every shipped
    run this is the rule by name it replaced, so no shipped run's phases move."""
    from matcomp.analysis.phases import paper_steps
    from matcomp.runs.shipped import REFERENCE_ROOT
    from matcomp.sizes import CHAPTER_SIZES

    paper = preset_config("paper", {"train.precision": "tf32", "train.steps": 32000})
    renamed = paper.override({"name": "custom"})
    assert renamed.hash == paper.hash and paper_steps(renamed) and paper_steps(paper)
    assert paper_steps(preset_config("paper12")) and not paper_steps(preset_config("paper", {"train.lr": 1e-3}))
    assert not paper_steps(preset_config("cpu").override({"name": "paper"}))
    shipped = [Run(path).config for path in sorted(REFERENCE_ROOT.iterdir()) if (path / "config.json").exists()]
    by_name = [cfg.name in CHAPTER_SIZES and CHAPTER_SIZES[cfg.name].paper_steps for cfg in shipped]
    assert [paper_steps(cfg) for cfg in shipped] == by_name and any(by_name)
