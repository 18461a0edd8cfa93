"""The models released as researchers expect (``python -m matcomp export``, ``matcomp.runs.export``): a run's
checkpoint loads into plain ``transformers`` with no key missing or unexpected and predicts what the library's
model predicts; the README's loading snippet is the paper model's, and runs; each paper-scale run folder carries
its model card, as the generator writes it now, without reading as damaged; bad input is named in one line
before any work."""

import json
import re
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModel, BertModel, GPT2LMHeadModel

from matcomp.data import sample_batch
from matcomp.main import main
from matcomp.models.gpt import sequences
from matcomp.runs.card import CARD, CARDED, LICENSE_ID, carded_runs, export_folder, loading_snippet, model_card
from matcomp.runs.export import MODEL, READOUT, export, find_run
from matcomp.runs.run import open_run, summarize, verify
from matcomp.runs.shipped import REFERENCE_ROOT, export_reference
from matcomp.seeding import analysis_generator
from matcomp.tokenizer import VOCAB_SIZE

ROOT = Path(__file__).resolve().parents[1]
SMALL = "cpu-f603ff8bc5"  # the book's default run: 4×4, hidden 64, twenty float32 checkpoints
PAPER = "paper-d34517864a"  # the paper's model, seed 0: bf16 checkpoints 4,000 and 29,000
METRICS_ALONE = "paper-08fef206d2"


def plain_bert(folder: Path) -> tuple[BertModel, torch.nn.Linear]:
    """The export as a researcher loads it, strictly: no key missing or unexpected in either file."""
    bert, info = BertModel.from_pretrained(folder, add_pooling_layer=False, dtype=torch.float32,
                                           output_loading_info=True)
    assert (info["missing_keys"], info["unexpected_keys"], info["mismatched_keys"]) == (set(), set(), set())
    readout = torch.nn.Linear(bert.config.hidden_size, 1)
    readout.load_state_dict(load_file(folder / READOUT), strict=True)
    return bert.eval(), readout


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    out = tmp_path_factory.mktemp("export") / "small"
    return export(find_run(SMALL), out)


def test_an_export_loads_strictly_into_plain_transformers_and_completes_as_the_library(small):
    run, folder = small.run, small.path
    assert sorted(p.name for p in folder.iterdir()) == sorted([CARD, "config.json", MODEL, READOUT])
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "bert" and config["architectures"] == ["BertModel"]
    assert (config["vocab_size"], config["intermediate_size"]) == (VOCAB_SIZE, 4 * run.config.model.hidden)
    assert config["matcomp"]["run_id"] == SMALL and config["matcomp"]["step"] == small.step == run.steps[-1]
    assert config["matcomp"]["tokens"]["value_id"] == "1001 + 100*x" and config["matcomp"]["tokens"]["mask_id"] == 0
    bert, readout = plain_bert(folder)
    batch = sample_batch(run.config.data, 32, analysis_generator(0))
    with torch.no_grad():
        theirs = readout(bert(input_ids=batch.ids).last_hidden_state).squeeze(-1)
        ours = run.bert(small.step)(batch.ids)
    torch.testing.assert_close(theirs, ours, rtol=1e-6, atol=1e-6)
    assert type(AutoModel.from_pretrained(folder, add_pooling_layer=False)).__name__ == "BertModel"  # model_type
    _, info = BertModel.from_pretrained(folder, output_loading_info=True)  # the default adds a pooler it never had
    assert info["missing_keys"] == {"pooler.dense.weight", "pooler.dense.bias"} and not info["unexpected_keys"]


def test_a_bf16_run_exports_its_tensors_as_stored_and_says_so(tmp_path):
    source = find_run(SMALL)
    run = export_reference(source, [source.steps[-1]], "the test's", root=tmp_path / "copy", dtype=torch.bfloat16)
    exported = export(run, tmp_path / "out")
    stored = load_file(run.folder.checkpoint_path(exported.step))
    written = {f"bert.{k}": v for k, v in load_file(exported.path / MODEL).items()}
    written |= {f"readout.{k}": v for k, v in load_file(exported.path / READOUT).items()}
    assert written.keys() == stored.keys() and all(torch.equal(written[k], v) and written[k].dtype == v.dtype
                                                   for k, v in stored.items())
    assert exported.dtype == "bfloat16" == json.loads((exported.path / "config.json").read_text())["dtype"]
    assert "its tensors in bfloat16" in (exported.path / CARD).read_text()
    bert, readout = plain_bert(exported.path)  # loaded as float32: the library's numerics on the same weights
    batch = sample_batch(run.config.data, 16, analysis_generator(1))
    with torch.no_grad():
        theirs = readout(bert(input_ids=batch.ids).last_hidden_state).squeeze(-1)
        torch.testing.assert_close(theirs, run.bert(exported.step)(batch.ids), rtol=1e-6, atol=1e-6)


def test_the_cards_loading_snippet_runs_on_an_export_and_completes_as_the_library(small, capsys):
    names: dict = {}
    exec(loading_snippet(small.run, str(small.path)), names)
    with torch.no_grad():
        ours = small.run.bert(small.step)(names["ids"]).view_as(names["X"])
    torch.testing.assert_close(names["predicted"], ours, rtol=1e-6, atol=1e-6)
    assert re.fullmatch(r"missing entries: MSE 0\.\d{4}, answering 0: 0\.\d{4}\n", capsys.readouterr().out)


def test_the_readme_loads_the_paper_model_with_its_cards_snippet():
    """The README's loading snippet is the one the paper model's card holds (the generator's, run above on a small
    export and below on the paper's), after the export command that writes the folder it reads."""
    run = find_run(PAPER)
    readme = (ROOT / "README.md").read_text()
    assert f"python -m matcomp export {PAPER} --out {export_folder(run)}" in readme
    assert f"```python\n{loading_snippet(run, export_folder(run))}```" in readme


@pytest.mark.slow
def test_the_paper_model_exports_and_the_readme_snippet_completes_it(tmp_path, monkeypatch, capsys):
    """Done when: ``BertModel.from_pretrained`` loads the exported paper model (its last checkpoint, bf16), the
    README's snippet completes the missing entries far better than answering 0, as the library does."""
    run = find_run(PAPER)
    monkeypatch.chdir(tmp_path)
    main(["export", PAPER, "--out", export_folder(run)])
    assert "exported step 29,000 of paper-d34517864a (bfloat16)" in capsys.readouterr().out
    plain_bert(tmp_path / export_folder(run))
    snippet = re.search(r"```python\n(import torch\nfrom safetensors.*?)```", (ROOT / "README.md").read_text(), re.S)
    names: dict = {}
    exec(snippet.group(1), names)
    with torch.no_grad():
        ours = run.bert(29000)(names["ids"]).view_as(names["X"])
    torch.testing.assert_close(names["predicted"], ours, rtol=1e-5, atol=1e-5)
    missing = ~names["observed"]
    mse, zero = (((names["predicted"] - names["X"])[missing] ** 2).mean().item(),
                 (names["X"][missing] ** 2).mean().item())
    assert mse < zero / 4, (mse, zero)


def test_a_gpt_run_exports_to_gpt2lmheadmodel_and_decodes_as_the_library(tmp_path, capsys):
    run = find_run(next(p.name for p in REFERENCE_ROOT.glob("cpu_gpt-*")))
    exported = export(run, tmp_path / "gpt")
    assert not (exported.path / READOUT).exists()
    gpt, info = GPT2LMHeadModel.from_pretrained(exported.path, dtype=torch.float32, output_loading_info=True)
    assert (info["missing_keys"], info["unexpected_keys"]) == (set(), set())
    batch = sample_batch(run.config.data, 8, analysis_generator(0))
    ours = run.gpt(exported.step)
    with torch.no_grad():
        torch.testing.assert_close(gpt.eval()(input_ids=sequences(batch)).logits, ours(sequences(batch)),
                                   rtol=1e-5, atol=1e-5)
    names: dict = {}
    exec(loading_snippet(run, str(exported.path)), names)
    seq, cells = names["seq"], names["X"][0].numel()
    assert torch.equal(seq[:, cells + 1:], ours.decode(seq[:, :cells + 1])[0])  # greedy, as the library decodes
    assert "missing entries: MSE" in capsys.readouterr().out


@pytest.mark.parametrize("name", [p.name for p in sorted(REFERENCE_ROOT.glob("*-*"))
                                  if p.is_dir() and p.name.rsplit("-", 1)[0] in CARDED])
def test_each_paper_run_folder_carries_its_current_card_and_still_reads_as_finished(name):
    """The card is generated from the run's own files (``python -m matcomp card``) and lies outside the seal: the
    folder verifies, opens and lists as finished with it, and the committed card is what the generator writes now."""
    run = find_run(name)
    card = run.path / CARD
    assert card.exists(), f"{name} has no model card: write it with python -m matcomp card and commit it"
    assert card.read_text() == model_card(run), (f"{card} is not the card its run's files make now: regenerate it "
                                                 f"with python -m matcomp card and commit it")
    assert CARD not in run.summary["files"] and verify(run.folder) is None and open_run(run.path).steps == run.steps
    assert "[finished]" in summarize(run.path)


def test_the_paper_models_card_says_where_it_stopped_and_how_far_below_its_plateau():
    card = (REFERENCE_ROOT / PAPER / CARD).read_text()
    for said in ("step 29,000 of 50,000, the last its wall-clock limit", "ends **6.53× below its plateau**",
                 "a value x is token 1001 + 100·x", "vocabulary 2002", "feed-forward 3072",
                 "steps 4,000 (on the plateau, before its drop), 29,000 (after its drop); stored in bfloat16"):
        assert said in card
    assert {run.config.run_id for run in carded_runs()} >= {PAPER, METRICS_ALONE}


def test_the_repository_has_the_licence_the_exports_declare():
    licence = (ROOT / "LICENSE").read_text()
    assert LICENSE_ID == "mit" and licence.startswith("MIT License") and "WITHOUT WARRANTY OF ANY KIND" in licence


@pytest.mark.parametrize("args, said", [
    (["nowhere-0123456789"], "unknown run 'nowhere-0123456789': neither a run folder nor a run id"),
    ([""], "the run is empty"),
    ([METRICS_ALONE], "paper-08fef206d2 is shipped with its metrics alone: there are no weights to export"),
    ([SMALL, "--step", "7"], "step 7 is not a checkpoint of cpu-f603ff8bc5; its checkpoints: [0, 250,"),
], ids=["unknown-run", "empty-run", "metrics-alone", "not-a-checkpoint"])
def test_bad_runs_and_steps_are_named_in_one_line_before_any_work(args, said, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as stopped:
        main(["export", *args, "--out", str(out)])
    assert str(stopped.value).startswith("error: ") and said in str(stopped.value) and "\n" not in str(stopped.value)
    assert not out.exists()


@pytest.mark.parametrize("where, said", [
    ("full", "exists and is not empty; name a new or empty folder (nothing is overwritten)"),
    ("file", "is a file; name a new folder"),
    ("file/under", "lies under the file"),
    ("/proc/matcomp-export", "cannot be written"),
    ("", "--out is empty (an unset shell variable?)"),
], ids=["not-empty", "a-file", "under-a-file", "not-writable", "empty"])
def test_an_out_folder_that_cannot_take_the_export_is_named_in_one_line_before_any_work(where, said, tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "kept.txt").write_text("mine")
    (tmp_path / "file").write_text("mine")
    out = where if where.startswith("/") or not where else str(tmp_path / where)
    with pytest.raises(SystemExit) as stopped:
        main(["export", SMALL, "--out", out])
    assert str(stopped.value).startswith("error: ") and said in str(stopped.value) and "\n" not in str(stopped.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "full"]  # nothing written beside them
    assert [p.name for p in (tmp_path / "full").iterdir()] == ["kept.txt"]


def test_an_empty_out_folder_takes_the_export(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    main(["export", str(REFERENCE_ROOT / SMALL), "--step", "4000", "--out", str(tmp_path / "empty")])
    assert "exported step 4,000 of cpu-f603ff8bc5 (float32)" in capsys.readouterr().out
    assert json.loads((tmp_path / "empty" / "config.json").read_text())["matcomp"]["step"] == 4000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"]  # no staging folder left beside it


def test_a_run_of_the_working_store_exports_by_its_id(micro, store, tmp_path):
    from matcomp.runs.store import get_or_train

    run = get_or_train(micro, progress=False)
    main(["export", micro.run_id, "--step", "15", "--out", str(tmp_path / "micro")])
    bert, readout = plain_bert(tmp_path / "micro")
    batch = sample_batch(micro.data, 8, analysis_generator(0))
    with torch.no_grad():
        theirs = readout(bert(input_ids=batch.ids).last_hidden_state).squeeze(-1)
        torch.testing.assert_close(theirs, run.bert(15)(batch.ids), rtol=1e-6, atol=1e-6)
    assert "It was trained by this repository's library" in (tmp_path / "micro" / CARD).read_text()
