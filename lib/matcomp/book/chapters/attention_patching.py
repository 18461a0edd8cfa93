"""The attention-patching chapter (NeurIPS §3.2, Fig. 4): the clean model's attention patched into a run on
-X, layer by layer and head by head, and how much of the clean answer it restores."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from IPython.display import Markdown

from matcomp.analysis.key_numbers import read_patching
from matcomp.analysis.stored_patching import patching_derivation
from matcomp.book.chapters import model_chapter_configs
from matcomp.book.judging.verdicts import CHECK, MOVES, Claim
from matcomp.book.paper_model import paper_model
from matcomp.book.parameters import COUNT, SEED, parameter
from matcomp.book.spec import ChapterSpec, KeyNumber, KeyNumbers, OneModelParameters
from matcomp.data import second_moment
from matcomp.paper import PATCHING, POST_SHIFT, Side, reported
from matcomp.presets import preset_config
from matcomp.runs.derived import Derivation


@dataclass(frozen=True)
class Parameters(OneModelParameters):
    """The parameters of the chapter's notebook (its ``parameters`` cell says what each does)."""

    samples: int = parameter(256, COUNT)  # matrices (the paper: 256)
    eval_seed: int = parameter(0, SEED)  # seed of the evaluation matrices


def restored_text(restored: pd.Series | None, n_layers: int) -> str:
    """Which single layer restores most of the clean answer (``restored_fraction`` by site; None: nothing to
    restore, the corrupted run answering as the clean one does), beside the last layer alone."""
    if restored is None:
        return ("At missing entries the corrupted run is within a tenth of the clean one's MSE to X: there is "
                "nothing to restore.")
    single = restored[[site for site in restored.index if site.startswith("layer ")]]
    best, last = single.idxmax(), f"layer {n_layers - 1}"
    tail = "more than any other single layer" if best == last else f"the last layer alone {restored['last layer']:.2f}"
    who = f"The last layer ({last})" if best == last else best.capitalize()
    return f"{who} alone restores {single.max():.2f} of the clean answer, {tail}."


def patching_values(layers: pd.DataFrame, restored: pd.Series | None, n_layers: int) -> dict[str, str | Markdown]:
    """What the chapter's closing sentences on the layer-patching table (``negation_patching`` by site) quote
    (keys ``pa_*``): what a single layer restores (``restored_text``, a sentence, so plain markdown), the MSE to X
    and to −X with every layer or the last patched, at observed entries and, for the last layer, at missing ones
    beside the paper's."""
    obs = {site: layers.loc[site, ["L_obs(X)", "L_obs(-X)"]] for site in ("all layers", "last layer")}
    to_x, to_neg = layers.loc["last layer", ["L_mask(X)", "L_mask(-X)"]]
    return {"pa_restored": Markdown(restored_text(restored, n_layers)),
            "pa_obs_all_x": f"{obs['all layers'].iloc[0]:.3g}", "pa_obs_all_neg": f"{obs['all layers'].iloc[1]:.3g}",
            "pa_obs_last_x": f"{obs['last layer'].iloc[0]:.3g}", "pa_obs_last_neg": f"{obs['last layer'].iloc[1]:.3g}",
            "pa_obs_nearer": "X" if obs["all layers"].iloc[0] < obs["all layers"].iloc[1] else "−X",
            "pa_last_x": f"{to_x:.3g}", "pa_last_neg": f"{to_neg:.3g}",
            "pa_paper_x": f"{PATCHING['all layers']['L_mask(X)']}",
            "pa_paper_neg": f"{PATCHING['all layers']['L_mask(-X)']}",
            "pa_clean": f"{layers.loc['clean', 'L_mask(X)']:.3g}"}


def paper_restored() -> float:
    """The share of the clean answer the paper's patching restores (App. F): its patched L_mask(X) against
    its clean model's, over the gap to the corrupted run, which answers −X at the missing entries
    (L_mask(X) = 4·E[X²] for an exact completion; the paper does not print it)."""
    clean, corrupted = reported(POST_SHIFT, "no intervention", 1), 4 * second_moment(preset_config("paper").data)
    return 1 - (PATCHING["all layers"]["L_mask(X)"] - clean) / (corrupted - clean)


def restored_derivation() -> str:
    """How ``paper_restored`` derives the paper's share from its two printed numbers and 4·E[X²].

    >>> restored_derivation()
    '1 − (0.014 − 0.0128) / (4·E[X²] 0.889 − 0.0128)'
    """
    clean, corrupted = reported(POST_SHIFT, "no intervention", 1), 4 * second_moment(preset_config("paper").data)
    return f"1 − ({PATCHING['all layers']['L_mask(X)']:g} − {clean:g}) / (4·E[X²] {corrupted:.3g} − {clean:g})"


def paper_patched_over_clean() -> float:
    """The paper's patched L_mask(X) over its clean model's, "approximately 0.014 (this is comparable to optimal
    L_mask)" (App. F) over 0.0128 (§3.2.1): about 1.09."""
    return PATCHING["all layers"]["L_mask(X)"] / reported(POST_SHIFT, "no intervention", 1)


# What patching restores is a structure of the model, which training does not move one way; the patched loss over
# the clean one it moves, the way no one can say (both still fall), so a run stopped short cannot tell. The text
# patches every head (which restores the clean run itself, in any model: a check); the authors' released code
# patches the last layer's, the variant read here. It "clearly steers the model output at missing entries"
# (§3.2.2): nearer X than −X, the book's reading; and its patched L_mask is "comparable to optimal L_mask" (App. F):
# the paper's value.
KEY_NUMBERS = KeyNumbers(read_patching, (
    KeyNumber("restored_all", "restored, all layers", Claim(paper_restored(), 0.5, derived=restored_derivation()),
              check=CHECK, tests=("patching_steers_missing",)),
    KeyNumber("restored_last", "restored, last layer", Claim(Side(0.5, strict=True), ours=True),
              tests=("patching_steers_missing",), from_code=True),
    KeyNumber("patched_last_over_clean", "last layer patched: L_mask(X) / clean L_mask",
              Claim(paper_patched_over_clean(), training=MOVES, derived="0.014 / 0.0128"),
              tests=("patching_steers_missing",),
              from_code=True)))


def paper_patching_derivation(preset: str | None = None, samples: int = Parameters.samples,
                              eval_seed: int = Parameters.eval_seed) -> Derivation | None:
    """The chapter's patching of the paper's model, its last checkpoint, where it is shipped with checkpoints
    (``paper_model``), else None: its layers and heads beside the stand-in's, minutes of forward passes on a CPU,
    so shipped."""
    paper = paper_model(preset)
    return None if paper is None else patching_derivation(paper[0], paper[1].post, samples, eval_seed)


def derivations(preset: str) -> list[Derivation]:
    """The paper's model's patching tables at ``preset`` with the chapter's default parameters, where shipped."""
    return list(filter(None, [paper_patching_derivation(preset)]))


CHAPTER = ChapterSpec("attention_patching", Parameters, model_chapter_configs, key_numbers=KEY_NUMBERS,
                      derivations=derivations)
