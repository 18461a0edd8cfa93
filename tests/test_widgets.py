import io

import ipywidgets as W
import matplotlib
import numpy as np
import pytest
import torch
from PIL import Image

from matcomp.book.widgets import PALETTE, AttentionExplorer, CheckpointExplorer, spread_steps
from matcomp.runs.store import get_or_train

matplotlib.use("Agg")


def shown(explorer) -> bytes:
    """The picture the browser shows: each Tab's child at the index its control's link gives, down to the image
    (the links are jslink: a browser follows them, so the test reads the controls as the browser would)."""
    widget = explorer.shown
    for control in explorer.controls.values():
        assert isinstance(widget, W.Tab) and "matcomp-pictures" in widget._dom_classes  # its tab bar hidden
        index = control.index if isinstance(control, (W.SelectionSlider, W.Dropdown)) else control.value
        widget = widget.children[index]
    return bytes(widget.value)


def links(explorer) -> set[tuple[str, str]]:
    """(control description, trait) of every jslink of ``explorer``, each to a Tab's selected_index."""
    assert all(isinstance(link.target[0], W.Tab) and link.target[1] == "selected_index" for link in explorer.links)
    return {(link.source[0].description, link.source[1]) for link in explorer.links}


def test_explorer_draws_a_picture_for_every_position_and_links_each_control(micro, store):
    run = get_or_train(micro, progress=False)
    explorer = CheckpointExplorer(run, samples=3, checkpoints=3)
    step, matrix = explorer.controls["step"], explorer.controls["matrix"]
    assert list(step.options) == spread_steps(run.steps, 3) == [0, 15, 40] and step.value == 40 and matrix.max == 2
    assert set(explorer.pictures) == {(s, m) for s in (0, 15, 40) for m in range(3)}
    assert all(p.startswith(b"\x89PNG") for p in explorer.pictures.values())
    assert len(set(explorer.pictures.values())) == 9  # each position its own picture
    assert links(explorer) == {("step", "index"), ("matrix", "value")}
    assert shown(explorer) == explorer.pictures[40, 0]
    step.value, matrix.value = 0, 2  # what the browser would then show, by the same links
    assert shown(explorer) == explorer.pictures[0, 2]
    fig = explorer.figure(0, 2)
    assert len(fig.axes) == 3 and fig.axes[0].get_title() == "true matrix $X$"
    assert not torch.allclose(explorer.prediction(0), explorer.prediction(40))
    assert all(not c.continuous_update for c in explorer.controls.values())  # sliders answer on release
    with pytest.raises(ValueError, match="samples must be >= 1"):
        CheckpointExplorer(run, samples=0)


def test_attention_explorer_shows_every_head_of_the_chosen_layer_and_mask(micro, store):
    run = get_or_train(micro.override({"data.n_rows": 4, "data.n_cols": 4, "model.layers": 2}), progress=False)
    explorer = AttentionExplorer(run, samples=4, checkpoints=2)
    assert explorer.controls["layer"].max == 1 and "head" not in explorer.controls
    assert len(explorer.pictures) == 2 * 2 * 3 and len(set(explorer.pictures.values())) == 12
    maps = explorer.maps(run.steps[-1], "structured")
    assert maps.shape == (2, 2, 16, 16) and torch.allclose(maps.sum(-1), torch.ones(2, 2, 16))
    structured = explorer.batches["structured"].observed[0]
    assert structured[3].sum() == 1 and structured[0].all()  # row 3 keeps one entry, row 0 is whole
    fig = explorer.figure(run.steps[-1], 1, "structured")
    assert [ax.get_title() for ax in fig.axes[:2]] == ["head 0", "head 1"]
    explorer.controls["mask"].value = "structured, swapped"
    assert shown(explorer) == explorer.pictures[run.steps[-1], 0, "structured, swapped"]


def test_a_picture_is_a_palette_png_that_looks_as_drawn_at_a_fraction_of_the_bytes(micro, store):
    run = get_or_train(micro, progress=False)
    explorer = CheckpointExplorer(run, samples=2, checkpoints=2)
    full = io.BytesIO()
    explorer.figure(run.steps[-1], 0).savefig(full, format="png", dpi=explorer.dpi, bbox_inches="tight")
    drawn = np.asarray(Image.open(full).convert("RGB"), dtype=float)
    kept = Image.open(io.BytesIO(explorer.pictures[run.steps[-1], 0]))
    assert kept.mode == "P" and len(kept.getcolors(maxcolors=PALETTE)) <= PALETTE
    shown = np.asarray(kept.convert("RGB"), dtype=float)
    assert np.abs(shown - drawn).mean() < 2 and (shown[0, 0] == drawn[0, 0]).all()  # of 255; the page's white kept
    assert len(explorer.pictures[run.steps[-1], 0]) < 0.6 * len(full.getvalue())


def test_the_controls_wrap_rather_than_shrink():
    from matcomp.book.widgets import CONTROL_WIDTH, FigureExplorer

    explorer = FigureExplorer(lambda step: matplotlib.figure.Figure(), {"step": W.IntSlider(min=0, max=1)})
    row = explorer.row
    assert explorer.widget.children[1:] == (row, explorer.shown)
    assert row.layout.flex_flow == "row wrap" and explorer.controls["step"].layout.width == CONTROL_WIDTH
    with pytest.raises(TypeError, match="a SelectionSlider, a Dropdown or an IntSlider from 0; got FloatSlider"):
        FigureExplorer(lambda x: None, {"x": W.FloatSlider()})
