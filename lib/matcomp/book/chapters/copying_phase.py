"""The copying-phase chapter (NeurIPS §3.1, Table 1): what the model outputs on its plateau (the observed
entries copied, ~0 at the missing ones) and what its attention does there."""

from __future__ import annotations

from dataclasses import dataclass

from matcomp.analysis.key_numbers import read_copying
from matcomp.analysis.stored_copying import copying_derivation
from matcomp.book.chapters import model_chapter_configs
from matcomp.book.judging.verdicts import MOVES, Claim
from matcomp.book.paper_model import paper_model
from matcomp.book.parameters import COUNT, SEED, parameter
from matcomp.book.spec import ChapterSpec, KeyNumber, KeyNumbers, OneModelParameters
from matcomp.data import second_moment
from matcomp.paper import COPY_TABLE, PRE_SHIFT, PRE_SHIFT_STEP, reported_ratio
from matcomp.presets import preset_config
from matcomp.runs.derived import Derivation


@dataclass(frozen=True)
class Parameters(OneModelParameters):
    """The parameters of the chapter's notebook (its ``parameters`` cell says what each does)."""

    copy_samples: int = parameter(512, COUNT)  # matrices per cell of the copy table (the paper: 512)
    ablation_samples: int = parameter(256, COUNT)  # matrices for the ablation and switching tests (the paper: 256)
    eval_seed: int = parameter(0, SEED)  # seed of the evaluation matrices


def copy_bound(inputs: str) -> Claim:
    """Table 1's claim that the pre-shift model "outputs the value of whatever token it reads" (§3.1.1) on
    ``inputs`` ("rank-2" or "random"), one-sided: its worst cell, L'_mask or L_obs, no larger than the worst the
    paper's own pre-shift model shows (its step-4,000 row), over E[X²], as a rise no larger than the paper's own
    model's is read elsewhere (``Claim.at_most``).

    >>> copy_bound("rank-2").text(how=True)
    "≤ 0.0018 (derived: Table 1's worst cell at step 4,000 0.0004 / E[X²] 0.2222)"
    """
    worst = max(max(cell) for (step, shown, _), cell in COPY_TABLE.items()
                if shown == inputs and step == PRE_SHIFT_STEP)
    copying = second_moment(preset_config("paper").data)
    return Claim(worst / copying, at_most=True,
                 derived=f"Table 1's worst cell at step {PRE_SHIFT_STEP:,} {worst:g} / E[X²] {copying:.4f}")


# the paper's claim: neither moves the pre-shift model (ratios near 1, NeurIPS §3.1); read on the pre-shift model,
# which training after the drop does not move, but for the switching, whose post-shift Q, K, V it still moves the way
# no one can say (``MOVES``)
KEY_NUMBERS = KeyNumbers(read_copying, (
    KeyNumber("copy_error_low_rank", "copies its input, low-rank inputs: worst L'_mask or L_obs / E[X²]",
              copy_bound("rank-2"), pre_shift=True, tests=("copy_token_intervention",)),
    KeyNumber("copy_error_random", "copies its input, random inputs: worst L'_mask or L_obs / E[X²]",
              copy_bound("random"), pre_shift=True, tests=("copy_random_matrices",)),
    KeyNumber("uniform_pre_obs", "uniform attention, pre-shift: L_obs ×",
              Claim(reported_ratio(PRE_SHIFT, "all heads uniform")), pre_shift=True,
              tests=("pre_shift_uniform_ablation", "pre_shift_copies_without_attention_or_positions")),
    KeyNumber("uniform_pre_mask", "uniform attention, pre-shift: L_mask ×",
              Claim(reported_ratio(PRE_SHIFT, "all heads uniform", 1)), pre_shift=True,
              tests=("pre_shift_uniform_ablation",)),
    KeyNumber("qkv_post_mask", "Q, K, V from post-shift: L_mask ×",  # the post-shift weights: training moves them
              Claim(reported_ratio(PRE_SHIFT, "Q, K, V from post-shift", 1), training=MOVES),
              tests=("pre_shift_model_switching",))))


def paper_copying_derivation(preset: str | None = None, copy_samples: int = Parameters.copy_samples,
                              ablation_samples: int = Parameters.ablation_samples,
                              eval_seed: int = Parameters.eval_seed) -> Derivation | None:
    """The chapter's copy table and interventions on the paper's model, its pre-shift checkpoint (the paper's step
    4,000) with its last as the donor, where it is shipped with checkpoints (``paper_model``), else None: minutes of
    forward passes on a CPU, so shipped."""
    paper = paper_model(preset)
    return None if paper is None else copying_derivation(paper[0], paper[1].pre, paper[1].post, copy_samples,
                                                         ablation_samples, eval_seed)


def derivations(preset: str) -> list[Derivation]:
    """The paper's model's copying tables at ``preset`` with the chapter's default parameters, where shipped."""
    return list(filter(None, [paper_copying_derivation(preset)]))


CHAPTER = ChapterSpec("copying_phase", Parameters, model_chapter_configs, key_numbers=KEY_NUMBERS,
                      derivations=derivations)
