"""The paper-scale pipeline of a machine lent for minutes (``matcomp.remote``, ``matcomp.runs.transfer``):
training stops cleanly before a wall-clock limit and resumes exactly, a run packs into verified parts and
installs from them, and the whole pipeline runs at ``smoke`` on the CPU, where the chapters' reading
code finds the installed run and its tables."""

import json

import pandas as pd
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file
from torch import nn
from transformers import BertConfig, BertModel

import matcomp.runs.derived as derived
import matcomp.runs.shipped as shipped
from matcomp.book.chapter import open_runs, paper_scale_configs
from matcomp.book.chapters import chapter_spec, chapter_specs
from matcomp.book.judging.ladder_readings import finding_ladders
from matcomp.data import sample_batch
from matcomp.main import main
from matcomp.presets import preset_config
from matcomp.remote import PACKING, kept_steps, remote
from matcomp.runs.folder import RunFolder
from matcomp.runs.run import open_run
from matcomp.runs.shipped import export_reference
from matcomp.runs.store import get_or_train
from matcomp.runs.training import Paused
from matcomp.runs.transfer import TransferError, pack_checkpoint, pack_record, unpack
from matcomp.seeding import analysis_generator
from matcomp.tokenizer import MASK_ID, VOCAB_SIZE

LOSSES = ["step", "L", "L_obs", "L_mask", "mask_value"]


def test_a_limit_pauses_at_a_checkpoint_and_the_next_call_resumes_exactly(micro, tmp_path):
    with pytest.raises(Paused, match="paused at its checkpoint of step 10 of 40"):
        get_or_train(micro, progress=False, root=tmp_path / "a", limit_s=0)
    folder = RunFolder(tmp_path / "a" / micro.run_id)
    assert folder.checkpoint_steps() == [0, 10] and not folder.complete_path.exists()
    resumed = get_or_train(micro, progress=False, root=tmp_path / "a", limit_s=1e6)
    straight = get_or_train(micro, progress=False, root=tmp_path / "b")
    pd.testing.assert_frame_equal(resumed.metrics[LOSSES], straight.metrics[LOSSES])
    assert resumed.steps == straight.steps == [0, 10, 15, 20, 30, 40]
    assert all(torch.equal(a, load_file(straight.folder.checkpoint_path(40))[k])
               for k, a in load_file(resumed.folder.checkpoint_path(40)).items())


@pytest.fixture
def bf16_run(micro, tmp_path):
    run = get_or_train(micro, progress=False, root=tmp_path / "store")
    return export_reference(run, [15, 40], "the test's", root=tmp_path / "copy", dtype=torch.bfloat16)


def test_a_run_packs_into_small_parts_and_unpacks_to_the_same_bytes(bf16_run, tmp_path):
    out = tmp_path / "out"
    files = pack_record(bf16_run, out, part_bytes=4096) + pack_checkpoint(bf16_run, 40, out, part_bytes=4096)
    parts = [p for p in files if ".part" in p.name]
    assert len(parts) > 4 and max(p.stat().st_size for p in parts) <= 4096
    installed = unpack([out], tmp_path / "reference")
    run = installed.run
    assert run.steps == [40] and installed.missing_steps == (15,)  # step 15 was not packed: said, not hidden
    assert run.folder.checkpoint_path(40).read_bytes() == bf16_run.folder.checkpoint_path(40).read_bytes()
    assert run.summary["checkpoint_dtype"] == "bfloat16" and open_run(run.path).config == bf16_run.config
    weights = load_file(run.folder.checkpoint_path(40))
    assert {t.dtype for t in weights.values() if t.is_floating_point()} == {torch.bfloat16}
    with pytest.raises(TransferError, match="exists already"):
        unpack([out], tmp_path / "reference")
    (tmp_path / "file").write_text("")
    with pytest.raises(TransferError, match=r"which is \(or lies under\) a file: name a folder"):
        unpack([out], tmp_path / "file")


def test_a_damaged_or_missing_part_is_named_and_nothing_is_installed(bf16_run, tmp_path):
    out = tmp_path / "out"
    pack_record(bf16_run, out)
    files = pack_checkpoint(bf16_run, 40, out, part_bytes=8192)
    part = files[1]
    data = bytearray(part.read_bytes())
    data[100] ^= 0xFF  # one byte flipped, the size kept
    part.write_bytes(bytes(data))
    with pytest.raises(TransferError, match=f"part {part} is damaged"):
        unpack([out], tmp_path / "reference")
    part.unlink()
    with pytest.raises(TransferError, match=f"part {part.name} is missing"):
        unpack([out], tmp_path / "reference")
    assert not (tmp_path / "reference" / bf16_run.config.run_id).exists()


def plain_predictions(path, ids: torch.Tensor) -> torch.Tensor:
    """What a user without this library does with a shipped checkpoint: the model's sizes from the file's own
    metadata, a plain ``transformers.BertModel`` and a ``torch.nn.Linear`` read-out."""
    with safe_open(str(path), framework="pt") as f:
        model = json.loads(f.metadata()["matcomp"])["model"]
    hidden = model["hidden"]
    config = BertConfig(vocab_size=VOCAB_SIZE, hidden_size=hidden, num_hidden_layers=model["layers"],
                        num_attention_heads=model["heads"], intermediate_size=model["intermediate"] or 4 * hidden,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, type_vocab_size=1,
                        max_position_embeddings=model["max_positions"], layer_norm_eps=1e-12, pad_token_id=MASK_ID)
    bert, readout = BertModel(config, add_pooling_layer=False), nn.Linear(hidden, 1)
    weights = {k: v.float() for k, v in load_file(path).items()}
    bert.load_state_dict({k.removeprefix("bert."): v for k, v in weights.items() if k.startswith("bert.")})
    readout.load_state_dict({k.removeprefix("readout."): v for k, v in weights.items() if k.startswith("readout.")})
    with torch.no_grad():
        return readout(bert.eval()(input_ids=ids).last_hidden_state).squeeze(-1)


def test_a_plain_transformers_bert_with_a_linear_readout_loads_a_packed_checkpoint(bf16_run):
    batch = sample_batch(bf16_run.config.data, 8, analysis_generator(0))
    with torch.no_grad():
        ours = bf16_run.bert(40)(batch.ids)
    torch.testing.assert_close(plain_predictions(bf16_run.folder.checkpoint_path(40), batch.ids), ours,
                               rtol=1e-5, atol=1e-5)


SHIPPED_BF16 = sorted(p for p in shipped.REFERENCE_ROOT.glob("*-*")
                      if p.is_dir() and '"checkpoint_dtype": "bfloat16"' in (p / "complete.json").read_text())


@pytest.mark.skipif(not SHIPPED_BF16, reason="no run is shipped with bf16 checkpoints yet (scripts/paper_on_gpu.sh)")
@pytest.mark.parametrize("path", SHIPPED_BF16 or [None], ids=lambda p: getattr(p, "name", "none"))
def test_every_shipped_bf16_model_loads_into_plain_transformers(path):
    run = open_run(path)
    step = run.steps[-1]
    batch = sample_batch(run.config.data, 8, analysis_generator(0))
    with torch.no_grad():
        ours = run.bert(step)(batch.ids)
    torch.testing.assert_close(plain_predictions(run.folder.checkpoint_path(step), batch.ids), ours,
                               rtol=1e-4, atol=1e-4)


def test_a_wall_clock_limit_seals_the_run_where_it_stopped_and_says_so(micro, tmp_path, monkeypatch):
    monkeypatch.setenv("MATCOMP_RUNS", str(tmp_path / "store"))
    progress = remote(micro, tmp_path / "out", "the test's", limit_s=1e-6, progress=False,
                      root=tmp_path / "packing")
    run = open_run(tmp_path / "store" / micro.run_id)  # sealed, verified, its last step where it stopped
    assert run.last_step == 10 < micro.train.steps and run.metrics.step.max() == 10
    assert run.summary["stopped"].startswith("at the checkpoint of step 10 of 40, the last its wall-clock limit")
    assert "trained to step 10 of 40 by the eager engine (stopped at the checkpoint of step 10" in progress.message
    assert {p.name for p in progress.files} >= {f"{micro.run_id}.record.json", f"{micro.run_id}.step_000010.json"}


def test_a_checkpoint_off_the_schedule_is_refused_before_any_training(micro, tmp_path, monkeypatch):
    monkeypatch.setenv("MATCOMP_RUNS", str(tmp_path / "store"))
    with pytest.raises(ValueError, match=r"checkpoint 12 is not one of micro-\w+'s checkpoints after step 0: "
                                         r"\[10, 15, 20, 30, 40\]"):
        remote(micro, tmp_path / "out", "the test's", checkpoint=12, progress=False)
    assert not (tmp_path / "store").exists()


@pytest.mark.slow
def test_the_pipeline_at_smoke_trains_packs_unpacks_and_the_chapters_read_it(tmp_path, monkeypatch, capsys):
    """The GPU script's two commands at ``smoke``, each on a store of its own as on a bare machine: the run
    (its record and last checkpoint) and one checkpoint trained again from step 0, which installs beside the
    record because its bytes are the record's, while one from another training is refused; then the
    tables are derived here from the installed bf16 weights (``derive``), and the chapters' reading code finds
    the run as the paper-scale rung and reads every key number from those tables, computing none."""
    command = ["remote", "--preset", "smoke", "--set", "train.precision=tf32", "--quiet", "--engine", "ahead"]
    monkeypatch.setenv("MATCOMP_RUNS", str(tmp_path / "machine-1"))
    main([*command, "--out", str(tmp_path / "run")])
    said = capsys.readouterr().out
    assert "trained to step 300 of 300 by the ahead engine" in said and "[100, 200] come back one a command" in said
    cfg = preset_config("smoke").override({"train.precision": "tf32"})
    copy = open_run(tmp_path / "machine-1" / PACKING / cfg.run_id)
    assert copy.steps == kept_steps(copy) == [100, 200, 300]  # no drop: every one, its phases the middle
    for step in (100, 200):
        monkeypatch.setenv("MATCOMP_RUNS", str(tmp_path / f"machine-{step}"))  # a bare machine each
        main([*command, "--checkpoint", str(step), "--out", str(tmp_path / f"checkpoint-{step}")])
        assert f"trained to step {step:,} and packed its checkpoint" in capsys.readouterr().out
        assert RunFolder(tmp_path / f"machine-{step}" / cfg.run_id).checkpoint_steps()[-1] == step  # no further
    monkeypatch.setenv("MATCOMP_RUNS", str(tmp_path / "machine-other"))  # the same run id, another engine
    main([*command[:-1], "eager", "--checkpoint", "100", "--out", str(tmp_path / "other")])
    with pytest.raises(TransferError, match="checkpoint 100 of smoke-\\w+ is not the one its record holds"):
        unpack([tmp_path / "run", tmp_path / "other"], tmp_path / "reference")
    assert not (tmp_path / "reference" / cfg.run_id).exists()
    calls = ["run", "checkpoint-100", "checkpoint-200"]

    reference = tmp_path / "reference"
    main(["unpack", *(str(tmp_path / call) for call in calls), "--into", str(reference)])
    assert "installed" in capsys.readouterr().out and open_run(reference / cfg.run_id).steps == [100, 200, 300]
    monkeypatch.setattr(shipped, "REFERENCE_ROOT", reference)
    monkeypatch.setattr(derived, "SHIPPED_ROOT", reference / "derived")
    monkeypatch.setenv("MATCOMP_RUNS", str(tmp_path / "home"))
    monkeypatch.setenv("MATCOMP_NO_TRAINING", "1")
    paper_scale = open_runs(paper_scale_configs("smoke"), "smoke", with_phases=True, metrics_only="train")
    (label, (run, shift)), = paper_scale.items()
    assert label.startswith("4×4 rank 1 (smoke, trained on ") and run.path.parent == reference
    tables = [s.key_numbers_derivation(run, shift, s.defaults("smoke")) for s in chapter_specs()
              if s.key_numbers and not s.key_numbers.metrics_only]
    assert not any(derived.is_shipped(d) for d in tables)  # none came back: the loan's minutes train
    for derivation in tables:  # what python -m matcomp derive does at home, from the installed bf16 weights
        derived.write(derivation, derivation.compute(), reference / "derived", derivation.key())
    monkeypatch.setenv("MATCOMP_RUNS", str(tmp_path / "empty-store"))  # a reader's store: nothing computed there
    params = chapter_spec("embeddings").defaults("smoke")
    embeddings, = (d for d in tables if d.name.startswith("key_numbers_embeddings"))
    stored = derived.read(embeddings, reference / "derived")[0]["numbers"]
    again = chapter_spec("embeddings").read_key_numbers(run, shift, params)  # equal to the stored table's 7 digits
    assert again.keys() == set(stored.index)  # (another machine's BLAS rounds the last digits otherwise)
    for key, row in stored.iterrows():  # each value and, where it is an estimate, its standard error
        assert again[key].value == pytest.approx(row.value, rel=1e-6), key
        assert again[key].se == pytest.approx(row.se, rel=1e-6, nan_ok=True), key
    ladder = finding_ladders(chapter_spec("embeddings"), {"stand-in": {0: (run, shift)}}, params, paper_scale)
    rung, = ladder.beyond.index  # the stand-in has no drop: counted, and read on its pre-shift number alone
    why = ladder.beyond_unread[rung]
    assert rung.startswith(label) and why["column_silhouette"] == "no drop in 300 steps"
    assert ladder.beyond_verdicts()[rung]["column_silhouette"].category == "cannot be read"
    assert ladder.beyond_verdicts()[rung]["column_silhouette_pre"].category != "cannot be read"
    assert not (tmp_path / "empty-store" / "derived").exists()  # every table was read, none computed
