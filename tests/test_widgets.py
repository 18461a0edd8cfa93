import matplotlib
import pytest
import torch

from matcomp.book.widgets import AttentionExplorer, CheckpointExplorer
from matcomp.runs.store import get_or_train

matplotlib.use("Agg")


def test_explorer_slides_over_checkpoints_and_shows_three_panels(micro, store):
    run = get_or_train(micro, progress=False)
    explorer = CheckpointExplorer(run, samples=3)
    step, matrix = explorer.controls["step"], explorer.controls["matrix"]
    assert list(step.options) == run.steps and step.value == run.steps[-1] and matrix.max == 2
    fig = explorer.figure(run.steps[0], 2)
    assert len(fig.axes) == 3 and fig.axes[0].get_title() == "true matrix $X$"
    assert explorer.prediction(0).shape == (3, 3, 3)
    assert not torch.allclose(explorer.prediction(0), explorer.prediction(run.steps[-1]))
    shown = bytes(explorer.image.value)
    assert shown.startswith(b"\x89PNG")
    step.value = run.steps[1]  # moving the slider computes that checkpoint and redraws
    assert run.steps[1] in explorer._predictions and bytes(explorer.image.value) != shown
    with pytest.raises(ValueError, match="samples must be >= 1"):
        CheckpointExplorer(run, samples=0)


def test_attention_explorer_shows_the_chosen_head_and_mask(micro, store):
    run = get_or_train(micro.override({"data.n_rows": 4, "data.n_cols": 4}), progress=False)
    explorer = AttentionExplorer(run, samples=4)
    assert explorer.controls["layer"].max == 0 and explorer.controls["head"].max == 1
    maps = explorer.maps(run.steps[-1], "structured")
    assert maps.shape == (1, 2, 16, 16) and torch.allclose(maps.sum(-1), torch.ones(1, 2, 16))
    structured = explorer.batches["structured"].observed[0]
    assert structured[3].sum() == 1 and structured[0].all()  # row 3 keeps one entry, row 0 is whole
    before = bytes(explorer.image.value)
    explorer.controls["head"].value = 1
    assert bytes(explorer.image.value) != before
