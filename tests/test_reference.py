"""Shipped reference runs: used only for an exactly matching config, never when damaged."""

import os

import pytest

import matcomp.runs.folder
import matcomp.runs.shipped
from matcomp.drop import Drop
from matcomp.runs.folder import RunFolder
from matcomp.runs.shipped import (
    add_checkpoints,
    export_reference,
    find_reference,
    narrow_reference,
    reference_steps,
)
from matcomp.runs.store import get_or_train
from matcomp.runs.training import Paused


@pytest.fixture
def shipped(micro, store, tmp_path, monkeypatch):
    root = tmp_path / "reference"
    monkeypatch.setattr(matcomp.runs.shipped, "REFERENCE_ROOT", root)
    run = get_or_train(micro, progress=False)
    return export_reference(run, [0, 20, 40], command="python -m matcomp train ...")


def test_export_keeps_the_chosen_checkpoints_and_the_command(shipped, micro):
    assert shipped.steps == [0, 20, 40]
    assert shipped.summary["command"] == "python -m matcomp train ..."
    assert set(shipped.summary["files"]) == {"config.json", "metrics.parquet", "checkpoints/step_000000.safetensors",
                                              "checkpoints/step_000020.safetensors",
                                              "checkpoints/step_000040.safetensors"}
    assert len(shipped.metrics) == micro.train.steps
    with pytest.raises(ValueError, match="exists already"):
        export_reference(get_or_train(micro, progress=False), [0], command="again")


def test_a_narrowed_run_keeps_its_chosen_checkpoints_sealed_and_says_how_it_was_made(micro, store, tmp_path,
                                                                                  monkeypatch):
    monkeypatch.setattr(matcomp.runs.shipped, "REFERENCE_ROOT", tmp_path / "reference")
    command = "python -m matcomp train --preset smoke --set train.seed=0 --threads 1 --no-shipped && python -m ..."
    shipped = export_reference(get_or_train(micro, progress=False), [0, 20, 40], command=command)
    with pytest.raises(ValueError, match=r"steps \[30\] are not shipped"):
        narrow_reference(shipped, [0, 30])
    narrowed = narrow_reference(shipped, [20])
    assert narrowed.path == shipped.path and narrowed.steps == [20] and narrowed.last_step == 40
    assert narrowed.summary["command"].endswith(
        "&& python -m matcomp ship --preset smoke --set train.seed=0 --steps 20")
    assert find_reference(micro).steps == [20]  # verified whole: complete.json lists what is left
    bare = narrow_reference(narrowed, [])  # the metrics alone
    assert find_reference(micro).steps == [] and bare.last_step == 40 and len(bare.metrics) == 40
    assert sorted(p.name for p in (tmp_path / "reference").iterdir()) == [shipped.path.name]  # nothing left aside
    with pytest.raises(ValueError, match="metrics alone, no checkpoint"):
        bare.nearest_step(20)


def test_a_run_kept_with_its_metrics_alone_gains_a_checkpoint_retrained_from_step_0(micro, store, tmp_path,
                                                                                   monkeypatch):
    """A seed kept without checkpoints gains its pre-shift model from a retraining that retraces its metrics bit for
    bit; a retraining that departs from them, or lacks the step, is refused and the shipped run is left whole."""
    monkeypatch.setattr(matcomp.runs.shipped, "REFERENCE_ROOT", tmp_path / "reference")
    bare = export_reference(get_or_train(micro, progress=False), [], command="python -m matcomp train ... --steps")
    other = tmp_path / "other"
    with pytest.raises(Paused):
        get_or_train(micro, progress=False, shipped=False, root=other, stop_at=20)
    source = RunFolder(other / micro.run_id)
    with pytest.raises(ValueError, match=r"steps \[30\] have no checkpoint"):
        add_checkpoints(bare, source, [30], "again")
    added = add_checkpoints(bare, source, [20], "python -m matcomp train ... && ... --add-steps 20")
    assert added.steps == [20] and added.last_step == 40 and added.summary["retraced"]["gap"] == 0.0
    assert find_reference(micro).steps == [20]  # sealed whole: its complete.json lists the new checkpoint
    assert added.summary["command"].endswith("--add-steps 20")
    with pytest.raises(ValueError, match=r"steps \[20\] are shipped with .* already"):
        add_checkpoints(added, source, [20], "again")  # never overwritten
    metrics = source.read_metrics()

    def retrained_as(table):  # a retraining that wrote these losses itself: its resume state records them
        source.write_resume({**source.read_resume(), "metrics_sha256": source.write_metrics(table)})

    narrowed = narrow_reference(added, [])
    source.write_metrics(metrics.assign(L=metrics.L * 1.1))  # changed after its training wrote it: not trusted
    with pytest.raises(ValueError, match="cannot be trusted \\(metrics.parquet has changed since its training"):
        add_checkpoints(narrowed, source, [20], "again")
    retrained_as(metrics.assign(L=metrics.L * 1.1))  # another run's losses
    with pytest.raises(ValueError, match="departs from the shipped"):
        add_checkpoints(narrowed, source, [20], "again")
    retrained_as(metrics.assign(L=float("nan")))  # a retraining whose loss went NaN retraces nothing
    with pytest.raises(ValueError, match="departs from the shipped"):
        add_checkpoints(narrowed, source, [20], "again")
    assert find_reference(micro).steps == [] and not list((tmp_path / "reference").glob(".*"))  # nothing aside


def test_opening_a_shipped_run_hashes_its_files_once_and_a_changed_file_again(shipped, micro, monkeypatch):
    """A chapter opens a shipped run several times (its announcement, its training guard, its phases): its bytes
    are hashed once per process once they have settled, and a file changed since is hashed again and refused."""
    hashed = []
    monkeypatch.setattr(matcomp.runs.folder, "_DIGESTS", {})
    monkeypatch.setattr(matcomp.runs.folder, "SETTLED_S", 0.0)  # settled at once (a clone's files are minutes old)
    real = matcomp.runs.folder.file_digest
    monkeypatch.setattr(matcomp.runs.folder, "file_digest", lambda path, *a: hashed.append(path) or real(path, *a))
    for _ in range(3):
        assert find_reference(micro).path == shipped.path
    assert sorted(hashed) == shipped.folder.files()  # every file once, over three openings
    checkpoint = shipped.folder.checkpoint_path(20)
    stat = checkpoint.stat()
    flip_last_bytes(checkpoint)
    os.utime(checkpoint, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # the same size and mtime: only its ctime moved
    with pytest.raises(ValueError, match="has changed since the run finished"):
        find_reference(micro)


def test_only_an_identical_config_uses_the_shipped_run(shipped, micro, monkeypatch):
    assert find_reference(micro).path == shipped.path
    assert find_reference(micro.override({"name": "renamed"})).path == shipped.path  # the name is a label
    assert find_reference(micro.override({"train.seed": 1})) is None
    assert find_reference(micro.override({"data.p_mask": 0.31})) is None
    monkeypatch.setattr("matcomp.runs.store.train", lambda *a, **k: pytest.fail("trained a shipped run"))
    assert get_or_train(micro, progress=False).path == shipped.path


def flip_last_bytes(path, n: int = 64) -> None:
    """Overwrite the last ``n`` bytes of ``path`` with others: the size stays the same."""
    data = bytearray(path.read_bytes())
    data[-n:] = bytes((b + 1) % 256 for b in data[-n:])
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damaged", ["checkpoints/step_000020.safetensors", "metrics.parquet", "config.json"])
def test_a_same_size_change_to_any_shipped_file_fails_loudly_with_the_regenerating_command(shipped, micro, damaged):
    if damaged == "config.json":  # a change that still parses and keeps the size: seed 0 -> 1
        text = shipped.folder.config_path.read_text()
        shipped.folder.config_path.write_text(text.replace('"seed": 0', '"seed": 1'))
        assert len(shipped.folder.config_path.read_text()) == len(text)
    else:
        flip_last_bytes(shipped.path / damaged)
    with pytest.raises(ValueError, match=r"damaged .*regenerate it: rm -r .* && python -m matcomp train \.\.\."):
        get_or_train(micro, progress=False)


def test_a_truncated_shipped_file_fails_loudly(shipped, micro):
    shipped.folder.checkpoint_path(20).write_bytes(b"")
    with pytest.raises(ValueError, match="wrong size"):
        find_reference(micro)


def test_reference_steps_fit_the_budget(micro, store):
    run = get_or_train(micro, progress=False)  # checkpoints 0, 10, 15, 20, 30, 40
    size = run.folder.checkpoint_path(0).stat().st_size
    fixed = run.folder.config_path.stat().st_size + run.folder.metrics_path.stat().st_size
    assert reference_steps(run, fixed + 10 * size) == run.steps
    assert reference_steps(run, fixed + 3 * size) == [0, 20, 40]
    assert reference_steps(run, fixed + 2 * size) == [0, 40]
    with pytest.raises(ValueError, match="at least 2"):
        reference_steps(run, fixed + size)
    run.__dict__["drop"] = Drop(plateau=0.1, half_step=20, tenfold_step=None, final=0.01)  # as if it dropped
    assert reference_steps(run, fixed + 2 * size) == [0, 40]  # the first and last fill the budget
    assert reference_steps(run, fixed + 4 * size) == [0, 15, 20, 40]  # two around the drop (15..25)
    assert reference_steps(run, fixed + 4 * size, keep=[10]) == [0, 10, 20, 40]  # kept first, then the drop
    with pytest.raises(ValueError, match="without a checkpoint: \\[11\\]"):
        reference_steps(run, fixed + 4 * size, keep=[11])
    with pytest.raises(ValueError, match="keep need 4"):
        reference_steps(run, fixed + 3 * size, keep=[10, 30])
