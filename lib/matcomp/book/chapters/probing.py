"""The probing chapter (NeurIPS §3.3, Fig. 6): linear probes of each layer's hidden states for the matrix's
entries and its row and column, before and after the drop, on the model and a deeper one."""

from __future__ import annotations

from matcomp.analysis.probing import answer_zero_mse, probe_comparison, probe_layers, probe_summary
from matcomp.book.chapter import (
    checked_parameters,
    model_preset,
    open_chapter,
    open_run,
    probing_config,
)
from matcomp.book.chapters import model_runs
from matcomp.book.summary import show_chapter_ladder
from matcomp.book.tables import at_step, findings, styled
from matcomp.config import RunConfig
from matcomp.data import sample_batch
from matcomp.paper import PROBING_BEST_LAYERS
from matcomp.seeding import analysis_generator

__all__ = [  # the names its notebook uses
    "PROBING_BEST_LAYERS", "analysis_generator", "answer_zero_mse", "at_step", "checked_parameters", "findings",
    "model_preset", "open_chapter", "open_run", "probe_comparison", "probe_layers", "probe_summary",
    "probing_config", "sample_batch", "show_chapter_ladder", "styled",
]


def runs_read(preset: str) -> list[RunConfig]:
    """The one-model runs (the chapter's model and its ladder), then the deeper model the probes also read."""
    deep = probing_config(preset)
    return model_runs(preset) + ([deep] if deep is not None else [])
