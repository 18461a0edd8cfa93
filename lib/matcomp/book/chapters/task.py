"""The task chapter (NeurIPS §2): the matrices, masks and tokens the models see, and the plateau level r/9."""

from __future__ import annotations

from dataclasses import dataclass

from matcomp.book.parameters import COUNT, SEED, parameter
from matcomp.book.spec import ChapterSpec, RunParameters
from matcomp.config import RunConfig


@dataclass(frozen=True)
class Parameters(RunParameters):
    """The parameters of the chapter's notebook (its ``parameters`` cell says what each does)."""

    example_seed: int = parameter(0, SEED)  # which random matrix to show
    moment_samples: int = parameter(20000, COUNT)  # matrices in the Monte Carlo check of r/9


def runs_read(preset: str) -> list[RunConfig]:
    """None: the chapter draws matrices and reads no run."""
    return []


CHAPTER = ChapterSpec("task", Parameters, runs_read)
