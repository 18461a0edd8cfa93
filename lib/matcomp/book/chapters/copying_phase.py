"""The copying-phase chapter (NeurIPS §3.1, Table 1): what the model outputs on its plateau (the observed
entries copied, ~0 at the missing ones) and what its attention does there."""

from __future__ import annotations

from dataclasses import dataclass

from matcomp.analysis.key_numbers import read_copying
from matcomp.book.chapters import model_runs
from matcomp.book.parameters import COUNT, SEED, parameter
from matcomp.book.spec import ChapterSpec, KeyNumber, KeyNumbers, OneModelParameters
from matcomp.book.verdicts import Claim
from matcomp.paper import PRE_SHIFT, reported_ratio


@dataclass(frozen=True)
class Parameters(OneModelParameters):
    """The parameters of the chapter's notebook (its ``parameters`` cell says what each does)."""

    copy_samples: int = parameter(512, COUNT)  # matrices per cell of the copy table (the paper: 512)
    ablation_samples: int = parameter(256, COUNT)  # matrices for the ablation and switching tests (the paper: 256)
    eval_seed: int = parameter(0, SEED)  # seed of the evaluation matrices


# the paper's claim: neither moves the pre-shift model (ratios near 1, NeurIPS §3.1); read on the pre-shift model
# (with the post-shift Q, K, V for the third), which training after the drop does not move one way
KEY_NUMBERS = KeyNumbers(read_copying, (
    KeyNumber("uniform_pre_obs", "uniform attention, pre-shift: L_obs ×",
              Claim(reported_ratio(PRE_SHIFT, "all heads uniform")), pre_shift=True,
              tests=("pre_shift_uniform_ablation", "pre_shift_copies_without_attention_or_positions")),
    KeyNumber("uniform_pre_mask", "uniform attention, pre-shift: L_mask ×",
              Claim(reported_ratio(PRE_SHIFT, "all heads uniform", 1)), pre_shift=True,
              tests=("pre_shift_uniform_ablation",)),
    KeyNumber("qkv_post_mask", "Q, K, V from post-shift: L_mask ×",
              Claim(reported_ratio(PRE_SHIFT, "Q, K, V from post-shift", 1)), tests=("pre_shift_model_switching",))))


CHAPTER = ChapterSpec("copying_phase", Parameters, model_runs, key_numbers=KEY_NUMBERS)
