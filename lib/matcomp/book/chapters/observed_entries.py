"""The observed-entries chapter (NeurIPS §3.2, Fig. 3): the trained model's loss when its input is
permuted or its attention confined, read against the copying plateau."""

from __future__ import annotations

from matcomp.analysis.interventions import attention_interventions
from matcomp.analysis.positions import permuted_losses
from matcomp.book.chapter import checked_parameters, model_preset, open_chapter
from matcomp.book.chapters import model_runs
from matcomp.book.summary import show_chapter_ladder
from matcomp.book.tables import beside_paper, findings, styled
from matcomp.config import RunConfig
from matcomp.data import sample_batch, second_moment
from matcomp.paper import POST_SHIFT, SUDDEN_DROP
from matcomp.seeding import analysis_generator

__all__ = [  # the names its notebook uses
    "POST_SHIFT", "SUDDEN_DROP", "analysis_generator", "attention_interventions", "beside_paper",
    "checked_parameters", "findings", "model_preset", "open_chapter", "permuted_losses", "sample_batch",
    "second_moment", "show_chapter_ladder", "styled",
]


def runs_read(preset: str) -> list[RunConfig]:
    """The one-model runs: the chapter's model and its ladder."""
    return model_runs(preset)
