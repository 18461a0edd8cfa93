"""The attention-patching chapter (NeurIPS §3.2, Fig. 4): the clean model's attention patched into a run on
-X, layer by layer and head by head, and how much of the clean answer it restores."""

from __future__ import annotations

import pandas as pd

from matcomp.analysis.patching import all_layers, last_layer, negation_patching, per_head, per_layer, restored_fraction
from matcomp.book.chapter import checked_parameters, model_preset, open_chapter
from matcomp.book.chapters import model_runs
from matcomp.book.summary import show_chapter_ladder
from matcomp.book.tables import findings, styled
from matcomp.config import RunConfig
from matcomp.data import sample_batch
from matcomp.paper import PATCHING
from matcomp.seeding import analysis_generator

__all__ = [  # the names its notebook uses
    "PATCHING", "all_layers", "analysis_generator", "checked_parameters", "findings", "last_layer",
    "model_preset", "negation_patching", "open_chapter", "patching_findings", "per_head", "per_layer",
    "restored_fraction", "sample_batch", "show_chapter_ladder", "styled",
]


def runs_read(preset: str) -> list[RunConfig]:
    """The one-model runs: the chapter's model and its ladder."""
    return model_runs(preset)


def patching_findings(layers: pd.DataFrame, restored: pd.Series | None, n_layers: int) -> list[str]:
    """The chapter's sentences on the layer-patching table (``negation_patching`` by site): which single layer
    restores most of the clean answer (``restored_fraction``; None: nothing to restore), and whether the
    observed entries, with every layer or the last patched, are nearer X or −X."""
    obs = {site: layers.loc[site, ["L_obs(X)", "L_obs(-X)"]] for site in ("all layers", "last layer")}
    sentences = [f"With every layer patched the observed entries have MSE {obs['all layers'].iloc[0]:.3g} to X and "
                 f"{obs['all layers'].iloc[1]:.3g} to −X; with the last layer patched, {obs['last layer'].iloc[0]:.3g} "
                 f"and {obs['last layer'].iloc[1]:.3g}: with every layer patched they are nearer "
                 f"{'X' if obs['all layers'].iloc[0] < obs['all layers'].iloc[1] else '−X'}."]
    if restored is not None:
        single = restored[[site for site in restored.index if site.startswith("layer ")]]
        best, last = single.idxmax(), f"layer {n_layers - 1}"
        sentences.insert(0, f"The last layer ({last}) alone restores {single.max():.2f} of the clean answer, "
                            "more than any other single layer." if best == last else
                            f"{best.capitalize()} alone restores {single.max():.2f} of the clean answer, "
                            f"the last layer alone {restored['last layer']:.2f}.")
    return sentences
