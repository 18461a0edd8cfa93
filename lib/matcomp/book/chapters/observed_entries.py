"""The observed-entries chapter (NeurIPS §3.2, Fig. 3): the trained model's loss when its input is
permuted or its attention confined, read against the copying plateau."""

from __future__ import annotations

from dataclasses import dataclass

from matcomp.analysis.key_numbers import read_observed
from matcomp.book.chapters import model_runs
from matcomp.book.parameters import COUNT, SEED, parameter
from matcomp.book.spec import ChapterSpec, KeyNumbers, OneModelParameters
from matcomp.book.verdicts import Claim
from matcomp.paper import POST_SHIFT, SUDDEN_DROP, reported, reported_ratio


@dataclass(frozen=True)
class Parameters(OneModelParameters):
    """The parameters of the chapter's notebook (its ``parameters`` cell says what each does)."""

    samples: int = parameter(256, COUNT)  # matrices per test (the paper: 256)
    permutations: int = parameter(5, COUNT)  # seeded position permutations to average over (the paper: one)
    eval_seed: int = parameter(0, SEED)  # seed of the evaluation matrices


def stays_small(intervention: str) -> Claim:
    """L_obs under ``intervention`` over L_obs without it "stays small" (NeurIPS §3.2.1), one-sided: a rise no
    larger than the paper's own model's, which it calls small, holds (``Claim.at_most``); a smaller rise is the
    paper's split more strongly, not a miss."""
    return Claim(reported_ratio(POST_SHIFT, intervention), at_most=True)


KEY_NUMBERS = KeyNumbers(read_observed, {
    "uniform attention, post-shift: L_obs ×": stays_small("all heads uniform"),
    "uniform attention, post-shift: L_mask / E[X²]":  # back to the plateau (§3.2.1)
        Claim(reported(POST_SHIFT, "all heads uniform", 1) / SUDDEN_DROP["L_mask on the plateau"]),
    "Q, K, V from pre-shift: L_obs ×": stays_small("Q, K, V from pre-shift"),
    "positions permuted: L_obs ×": stays_small("positions permuted"),
    "positions permuted: L_mask / E[X²]":
        Claim(reported(POST_SHIFT, "positions permuted", 1) / SUDDEN_DROP["L_mask on the plateau"], 1.0)})


CHAPTER = ChapterSpec("observed_entries", Parameters, model_runs, key_numbers=KEY_NUMBERS)
