"""The introduction's computed parts: the verdict categories and every chapter's verdicts in one table."""

from __future__ import annotations

from matcomp.book.chapter import checked_parameters
from matcomp.book.summary import categories_table, chapter_ladders, linked, register_table, verdict_table
from matcomp.book.tables import glue_texts, styled
from matcomp.book.verdicts import TOLERANCE
from matcomp.config import RunConfig

__all__ = [  # the names its notebook uses
    "TOLERANCE", "categories_table", "chapter_ladders", "checked_parameters", "glue_texts", "linked", "register_table",
    "styled",
    "verdict_table",
]


def runs_read(preset: str) -> list[RunConfig]:
    """None of its own: the verdict table reads the runs of the chapters it summarises."""
    return []
