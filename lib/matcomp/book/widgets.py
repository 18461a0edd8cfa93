"""Interactive explorers for the chapters (ipywidgets).

Each explorer is a row of controls above a picture. Every picture is drawn when the explorer is made, one for
each position of each control, and the browser shows the one the controls name: each control is linked
(``W.jslink``) to the ``selected_index`` of a ``W.Tab`` of pictures with its tab bar hidden (``PICTURES_CSS``),
tabs nested one level per control. A Tab, not a Stack: a Stack makes its shown child's view anew at every change
and, told to change again before that view is drawn, messages the view it has just removed (a console error at
every quick run of key presses); a Tab draws every child once and only shows another. Nothing is redrawn by a
kernel, so the built book's saved widget state answers every control as a live notebook does. The positions are
few (a dozen checkpoints, a few matrices) so that a page stays light.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence

import ipywidgets as W
import matplotlib.pyplot as plt
import numpy as np
import torch
from IPython.display import display
from PIL import Image

from matcomp.analysis.evaluation import predict
from matcomp.analysis.heads import fig5_mask, mean_maps
from matcomp.book.plots.matrices import completion_figure, matrix_panel
from matcomp.data import sample_batch
from matcomp.runs.run import Run
from matcomp.seeding import analysis_generator

CONTROL_WIDTH = "320px"  # each control's own width: the row wraps rather than squeezing a slider to no track
PALETTE = 256  # colours of an explorer's pictures (``FigureExplorer.picture``)
PICTURES = "matcomp-pictures"  # the class of an explorer's tabs of pictures
# shown in the explorer itself, so that the book and JupyterLab alike show the picture alone: no tab bar, no frame
_TAB = f".jupyter-widgets.widget-tab.{PICTURES}"  # more specific than the widgets' own rules for a tab
PICTURES_CSS = (f"<style>{_TAB} > .widget-tab-bar {{ display: none; }} "
                f"{_TAB} > .widget-tab-contents {{ border: none; padding: 0; margin: 0; }}</style>")


def spread_steps(steps: Sequence[int], count: int) -> list[int]:
    """At most ``count`` of ``steps``, evenly spread over the list and keeping its first and last: the checkpoints an
    explorer draws.

    >>> spread_steps(range(0, 2001, 250), 4)
    [0, 750, 1250, 2000]
    """
    if count < 2:
        raise ValueError(f"an explorer shows at least 2 checkpoints; got count {count}")
    steps = list(steps)
    picks = np.unique(np.round(np.linspace(0, len(steps) - 1, min(count, len(steps)))).astype(int))
    return [steps[i] for i in picks]


def _positions(control: W.ValueWidget) -> tuple[str, list]:
    """The trait of ``control`` that counts its positions from 0 (what a Tab's ``selected_index`` takes), and the
    values at those positions."""
    if isinstance(control, (W.SelectionSlider, W.Dropdown)):
        return "index", list(control.options)
    if isinstance(control, W.IntSlider) and control.min == 0:
        return "value", list(range(control.max + 1))
    raise TypeError(f"an explorer's control must be a SelectionSlider, a Dropdown or an IntSlider from 0; got "
                    f"{type(control).__name__}")


class FigureExplorer:
    """Controls (name -> widget, each a SelectionSlider, Dropdown or IntSlider from 0) and, for every combination of
    their positions, the figure ``draw(**values)`` returns, rendered to PNG when the explorer is made and switched by
    the controls in the browser."""

    def __init__(self, draw: Callable[..., plt.Figure], controls: dict[str, W.ValueWidget], dpi: int = 80):
        self.draw, self.controls, self.dpi = draw, controls, dpi
        self.pictures: dict[tuple, bytes] = {}  # the values of the controls, in their order -> the PNG shown
        self.links: list[W.Widget] = []  # each control's jslink to the selected_index of a Tab it switches
        for control in controls.values():
            control.layout = W.Layout(width=CONTROL_WIDTH)
            control.style = {"description_width": "initial"}
        self.row = W.HBox(list(controls.values()), layout=W.Layout(flex_flow="row wrap"))  # the controls
        self.shown = self._tabs({}, list(controls.items()))  # the pictures, one shown
        self.widget = W.VBox([W.HTML(PICTURES_CSS), self.row, self.shown])

    def _tabs(self, fixed: dict, left: list[tuple[str, W.ValueWidget]]) -> W.Widget:
        """The pictures for every position of the controls ``left`` with the others at ``fixed``: an image, or a
        Tab of such, one child a position of the first control left, linked to it."""
        if not left:
            self.pictures[tuple(fixed.values())] = self.picture(**fixed)
            return W.Image(value=self.pictures[tuple(fixed.values())], format="png")
        (name, control), rest = left[0], left[1:]
        trait, values = _positions(control)
        tabs = W.Tab([self._tabs({**fixed, name: value}, rest) for value in values],
                     selected_index=values.index(control.value))
        tabs.add_class(PICTURES)
        self.links.append(W.jslink((control, trait), (tabs, "selected_index")))
        return tabs

    def picture(self, **values) -> bytes:
        """The PNG of ``draw(**values)``, in a palette of 256 colours: about a fifth of the full-colour bytes, no
        change the eye sees (an attention explorer's 48 pictures weighed 10 MB in full colour), so that every
        position of the controls fits in one page."""
        fig = self.draw(**values)
        drawn, buffer = io.BytesIO(), io.BytesIO()
        fig.savefig(drawn, format="png", dpi=self.dpi, bbox_inches="tight")
        plt.close(fig)
        image = Image.open(drawn).convert("RGB").quantize(colors=PALETTE, method=Image.Quantize.MAXCOVERAGE)
        image.save(buffer, format="png", optimize=True)
        return buffer.getvalue()

    def _ipython_display_(self) -> None:
        display(self.widget)


class CheckpointExplorer(FigureExplorer):
    """A slider over ``checkpoints`` of a run's saved checkpoints (spread over the run, ``spread_steps``) and one over
    a few fixed test matrices, showing the true matrix, the masked input and the model's prediction at that step."""

    def __init__(self, run: Run, samples: int = 4, seed: int = 0, checkpoints: int = 12):
        if samples < 1:
            raise ValueError(f"samples must be >= 1; got {samples}")
        self.run = run
        self.batch = sample_batch(run.config.data, samples, analysis_generator(seed))
        self._predictions: dict[int, torch.Tensor] = {}
        steps = spread_steps(run.steps, checkpoints)
        super().__init__(self.figure, {
            "step": W.SelectionSlider(options=steps, value=steps[-1], description="step", continuous_update=False),
            "matrix": W.IntSlider(value=0, min=0, max=samples - 1, description="matrix", continuous_update=False),
        })

    def prediction(self, step: int) -> torch.Tensor:
        """Predictions (B, m, n) of the checkpoint at ``step`` on the explorer's matrices."""
        if step not in self._predictions:
            pred = predict(self.run.bert(step), self.batch.ids)
            self._predictions[step] = pred.reshape(self.batch.values.shape)
        return self._predictions[step]

    def figure(self, step: int, matrix: int) -> plt.Figure:
        b = self.batch
        return completion_figure(b.values[matrix], b.observed[matrix], self.prediction(step)[matrix],
                                 title=f"step {step}, matrix {matrix}")


class AttentionExplorer(FigureExplorer):
    """Choose a checkpoint (of ``checkpoints`` spread over the run), a layer and a kind of mask: every head's
    attention map in that layer averaged over a batch, beside one input matrix of the batch (missing entries
    hatched)."""

    MASKS = ("random", "structured", "structured, swapped")

    def __init__(self, run: Run, samples: int = 64, seed: int = 0, checkpoints: int = 4, dpi: int = 60):
        if samples < 1:
            raise ValueError(f"samples must be >= 1; got {samples}")
        data, model = run.config.data, run.config.model
        self.run = run
        masks = {"random": None, "structured": fig5_mask(data.n_rows, data.n_cols),
                 "structured, swapped": fig5_mask(data.n_rows, data.n_cols, swapped=True)}
        self.batches = {name: sample_batch(data, samples, analysis_generator(seed), mask=mask)
                        for name, mask in masks.items()}
        self._maps: dict[tuple[int, str], torch.Tensor] = {}
        steps = spread_steps(run.steps, checkpoints)
        super().__init__(self.figure, {
            "step": W.SelectionSlider(options=steps, value=steps[-1], description="step", continuous_update=False),
            "layer": W.IntSlider(value=0, min=0, max=model.layers - 1, description="layer", continuous_update=False),
            "mask": W.Dropdown(options=self.MASKS, value="random", description="masks"),
        }, dpi)

    def maps(self, step: int, mask: str) -> torch.Tensor:
        """(L, H, S, S) maps of the checkpoint at ``step`` averaged over the batch of ``mask``."""
        if (step, mask) not in self._maps:
            self._maps[step, mask] = mean_maps(self.run.bert(step), self.batches[mask])
        return self._maps[step, mask]

    def figure(self, step: int, layer: int, mask: str) -> plt.Figure:
        batch, maps = self.batches[mask], self.maps(step, mask)[layer].numpy()
        heads = len(maps)
        cols = min(heads, 4)
        rows = -(-heads // cols)
        fig = plt.figure(figsize=(2.2 * cols + 3.2, 2.3 * rows + 0.6), layout="constrained")
        grid = fig.add_gridspec(rows, cols + 1, width_ratios=[1] * cols + [1.4])
        for head in range(heads):
            ax = fig.add_subplot(grid[head // cols, head % cols])
            image = ax.imshow(maps[head], cmap="viridis", vmin=0, vmax=float(maps.max()))
            ax.set(title=f"head {head}", xticks=[], yticks=[])
        fig.colorbar(image, ax=fig.axes, shrink=0.6, location="left")
        matrix_panel(fig.add_subplot(grid[:, cols]), batch.values[0], missing=~batch.observed[0],
                     title="matrix 0 of the batch")
        fig.suptitle(f"layer {layer} at step {step}: each head's attention (query down, key across), mean over "
                     f"{len(batch)} matrices, {mask} masks")
        return fig
