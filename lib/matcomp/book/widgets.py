"""Interactive explorers for the chapters (ipywidgets).

Each explorer is a row of controls above a picture: a matplotlib figure rendered to PNG into an
``ipywidgets.Image`` whenever a control moves. No Output widget and no kernel round trip for
display, so the picture is part of the widget state that the built book saves: the static page
shows the view at the initial values, and a live kernel redraws on every change.
"""

from __future__ import annotations

import io
from collections.abc import Callable

import ipywidgets as W
import matplotlib.pyplot as plt
import torch
from IPython.display import display

from matcomp.analysis.evaluation import predict
from matcomp.analysis.heads import fig5_mask, mean_maps
from matcomp.book.plots.matrices import completion_figure, matrix_panel
from matcomp.data import sample_batch
from matcomp.runs.run import Run
from matcomp.seeding import analysis_generator


class FigureExplorer:
    """Controls (name -> widget) and the figure ``draw(**values)`` returns, redrawn on every change."""

    def __init__(self, draw: Callable[..., plt.Figure], controls: dict[str, W.ValueWidget], dpi: int = 80):
        self.draw, self.controls, self.dpi = draw, controls, dpi
        self.image = W.Image(format="png")
        for control in controls.values():
            control.observe(self.update, names="value")
        self.widget = W.VBox([W.HBox(list(controls.values())), self.image])
        self.update()

    def values(self) -> dict:
        return {name: control.value for name, control in self.controls.items()}

    def update(self, change=None) -> None:
        fig = self.draw(**self.values())
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=self.dpi, bbox_inches="tight")
        plt.close(fig)
        self.image.value = buffer.getvalue()

    def _ipython_display_(self) -> None:
        display(self.widget)


class CheckpointExplorer(FigureExplorer):
    """A slider over a run's saved checkpoints and one over a few fixed test matrices, showing the
    true matrix, the masked input and the model's prediction at that step."""

    def __init__(self, run: Run, samples: int = 8, seed: int = 0, step: int | None = None):
        if samples < 1:
            raise ValueError(f"samples must be >= 1; got {samples}")
        self.run = run
        self.batch = sample_batch(run.config.data, samples, analysis_generator(seed))
        self._predictions: dict[int, torch.Tensor] = {}
        step = run.steps[-1] if step is None else run.nearest_step(step)
        super().__init__(self.figure, {
            "step": W.SelectionSlider(options=run.steps, value=step, description="step", continuous_update=False,
                                      layout=W.Layout(width="55%")),
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
    """Choose a checkpoint, a layer, a head and a kind of mask: that head's attention map averaged
    over a batch, next to one input matrix of the batch (missing entries hatched)."""

    MASKS = ("random", "structured", "structured, swapped")

    def __init__(self, run: Run, samples: int = 64, seed: int = 0, step: int | None = None):
        if samples < 1:
            raise ValueError(f"samples must be >= 1; got {samples}")
        data, model = run.config.data, run.config.model
        self.run = run
        masks = {"random": None, "structured": fig5_mask(data.n_rows, data.n_cols),
                 "structured, swapped": fig5_mask(data.n_rows, data.n_cols, swapped=True)}
        self.batches = {name: sample_batch(data, samples, analysis_generator(seed), mask=mask)
                        for name, mask in masks.items()}
        self._maps: dict[tuple[int, str], torch.Tensor] = {}
        step = run.steps[-1] if step is None else run.nearest_step(step)
        super().__init__(self.figure, {
            "step": W.SelectionSlider(options=run.steps, value=step, description="step", continuous_update=False),
            "layer": W.IntSlider(value=0, min=0, max=model.layers - 1, description="layer"),
            "head": W.IntSlider(value=0, min=0, max=model.heads - 1, description="head"),
            "mask": W.Dropdown(options=self.MASKS, value="random", description="masks"),
        })

    def maps(self, step: int, mask: str) -> torch.Tensor:
        """(L, H, S, S) maps of the checkpoint at ``step`` averaged over the batch of ``mask``."""
        if (step, mask) not in self._maps:
            self._maps[step, mask] = mean_maps(self.run.bert(step), self.batches[mask])
        return self._maps[step, mask]

    def figure(self, step: int, layer: int, head: int, mask: str) -> plt.Figure:
        batch = self.batches[mask]
        fig, (left, right) = plt.subplots(1, 2, figsize=(9, 4), width_ratios=[1.2, 1], layout="constrained")
        image = left.imshow(self.maps(step, mask)[layer, head].numpy(), cmap="viridis", vmin=0)
        fig.colorbar(image, ax=left, shrink=0.8)
        left.set(title=f"layer {layer}, head {head} at step {step}\n(mean over {len(batch)} matrices, {mask} masks)",
                 xlabel="key position", ylabel="query position")
        matrix_panel(right, batch.values[0], missing=~batch.observed[0], title="matrix 0 of the batch")
        return fig
