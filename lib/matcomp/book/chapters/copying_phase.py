"""The copying-phase chapter (NeurIPS §3.1, Table 1): what the model outputs on its plateau (the observed
entries copied, ~0 at the missing ones) and what its attention does there."""

from __future__ import annotations

from matcomp.analysis.evaluation import copy_check, copy_label, losses
from matcomp.analysis.interventions import attention_interventions
from matcomp.analysis.phases import answer_rise
from matcomp.book.chapter import checked_parameters, model_preset, open_chapter
from matcomp.book.chapters import model_runs
from matcomp.book.summary import show_chapter_ladder
from matcomp.book.tables import beside_paper, findings, moves_text, styled
from matcomp.config import RunConfig
from matcomp.data import sample_batch
from matcomp.drop import ON_PLATEAU
from matcomp.paper import COPY_VALUES, PRE_SHIFT, copy_table
from matcomp.seeding import analysis_generator

__all__ = [  # the names its notebook uses
    "COPY_VALUES", "ON_PLATEAU", "PRE_SHIFT", "analysis_generator", "answer_rise", "attention_interventions",
    "beside_paper", "checked_parameters", "copy_check", "copy_label", "copy_table", "findings", "losses",
    "model_preset", "moves_text", "open_chapter", "sample_batch", "show_chapter_ladder", "styled",
]


def runs_read(preset: str) -> list[RunConfig]:
    """The one-model runs: the chapter's model and its ladder."""
    return model_runs(preset)
