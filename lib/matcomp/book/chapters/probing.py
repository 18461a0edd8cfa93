"""The probing chapter (NeurIPS §3.3, Fig. 6): linear probes of each layer's hidden states for the matrix's
entries and its row and column, before and after the drop, on the model and a deeper one."""

from __future__ import annotations

from dataclasses import dataclass

from matcomp.analysis.key_numbers import read_probing
from matcomp.analysis.stored_probes import probes_derivation
from matcomp.book.chapter import probing_config
from matcomp.book.chapters import model_chapter_configs
from matcomp.book.judging.verdicts import CHECK, FALLS, Claim
from matcomp.book.paper_model import paper_model
from matcomp.book.parameters import COUNT, parameter
from matcomp.book.spec import ChapterSpec, KeyNumber, KeyNumbers, OneModelParameters
from matcomp.config import RunConfig
from matcomp.paper import Side
from matcomp.runs.derived import Derivation


@dataclass(frozen=True)
class Parameters(OneModelParameters):
    """The parameters of the chapter's notebook (its ``parameters`` cell says what each does)."""

    train_matrices: int = parameter(2048, COUNT)  # matrices whose positions fit each probe (the paper: 2,048)
    test_matrices: int = parameter(256, COUNT)  # held-out matrices that score it (the paper: 256)


def runs_read(preset: str) -> list[RunConfig]:
    """The one-model runs (the chapter's model and its ladder), then the deeper model the probes also read."""
    deep = probing_config(preset)
    return model_chapter_configs(preset) + ([deep] if deep is not None else [])


# The paper's masked-row probe "correlates quite strongly" at layers 3-4 of 12 (§3.3, Fig. 6), with no number: the
# ladder judges the first part, that the row is held, by the book's bound (the best layer's probe halves the MSE of
# answering 0). Where it is held cannot be judged on a 4-layer model, whose layers are a quarter of its depth apart;
# the probing chapter's 12-layer model reads it, and the ladder judges no weaker stand-in for it. The value is read
# gradually better with depth; the first over the last layer's MSE holds in any model that dropped. Training still
# lowers the masked-row probe's ratio (the model learns to hold the row as it completes); the count of layers that
# lower the element probe's MSE is a shape of the network, which training does not move one way.
KEY_NUMBERS = KeyNumbers(read_probing, (
    KeyNumber("row_probe_ratio", "masked-row probe: best layer's MSE / answering 0's",
              Claim(Side(0.5, above=False), ours=True, training=FALLS), tests=("probe_masked_row",)),
    KeyNumber("element_layers_lowering", "element probe at missing entries: layers that lower its MSE",
              Claim(Side(1), ours=True), tests=("probe_element_depth",)),  # "gradually", read as every layer
    KeyNumber("element_first_over_last", "element probe at missing entries: first / last layer MSE",
              Claim(Side(1, strict=True)), check=CHECK, tests=("probe_element_depth",))))


def paper_probes_derivation(preset: str | None = None, train_matrices: int = Parameters.train_matrices,
                            test_matrices: int = Parameters.test_matrices) -> Derivation | None:
    """The chapter's three probes on the paper's model, its last checkpoint, where it is shipped with checkpoints
    (``paper_model``), else None: its Fig. 6 profile beside the stand-in's, minutes of forward passes on a CPU, so
    shipped."""
    paper = paper_model(preset)
    return None if paper is None else probes_derivation(paper[0], paper[1].post, train_matrices, test_matrices)


def derivations(preset: str) -> list[Derivation]:
    """The paper's model's probe tables at ``preset`` with the chapter's default parameters, where it is shipped."""
    return list(filter(None, [paper_probes_derivation(preset)]))


CHAPTER = ChapterSpec("probing", Parameters, runs_read, key_numbers=KEY_NUMBERS, derivations=derivations)
