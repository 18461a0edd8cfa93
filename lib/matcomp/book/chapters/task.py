"""The task chapter (NeurIPS §2): the matrices, masks and tokens the models see, and the plateau level r/9."""

from __future__ import annotations

from matcomp.analysis.evaluation import second_moments
from matcomp.book.chapter import chapter_config, checked_parameters, preset_name
from matcomp.book.tables import glue_texts
from matcomp.config import RunConfig
from matcomp.data import sample_batch, second_moment
from matcomp.presets import preset as named_preset
from matcomp.seeding import analysis_generator
from matcomp.tokenizer import BERT_TOKENS

__all__ = [  # the names its notebook uses
    "BERT_TOKENS", "analysis_generator", "chapter_config", "checked_parameters", "glue_texts", "named_preset",
    "preset_name", "sample_batch", "second_moment", "second_moments",
]


def runs_read(preset: str) -> list[RunConfig]:
    """None: the chapter draws matrices and reads no run."""
    return []
