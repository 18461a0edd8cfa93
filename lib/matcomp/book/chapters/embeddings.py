"""The embeddings chapter (NeurIPS Fig. 7): the value tokens' and the positions' embeddings of the
trained model, how the positions group over training and over seeds, and its sentences on them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd
import torch

from matcomp.analysis.embeddings import (
    norm_symmetry,
    position_grouping,
    position_groups,
    task_values,
)
from matcomp.analysis.key_numbers import read_embeddings
from matcomp.analysis.phases import Phases
from matcomp.book.chapter import model_preset, open_chapter
from matcomp.book.chapters import model_chapter_configs, seed_part_configs
from matcomp.book.judging.verdicts import CHECK, MOVES, Claim
from matcomp.book.parameters import COUNT, TSNE_SEED, parameter
from matcomp.book.spec import ChapterSpec, KeyNumber, KeyNumbers, OneModelParameters
from matcomp.book.tables import at_step
from matcomp.config import RunConfig
from matcomp.models.factory import Model
from matcomp.paper import Side
from matcomp.runs.run import Run
from matcomp.sizes import chapter_sizes


@dataclass(frozen=True)
class Parameters(OneModelParameters):
    """The parameters of the chapter's notebook (its ``parameters`` cell says what each does)."""

    value_samples: int = parameter(4096, COUNT)  # matrices sampled to find the range of values the model sees
    tsne_seed: int = parameter(0, TSNE_SEED)  # seed of the t-SNE layout
    # runs of the scale's preset (seeds from `seed` on) whose position embeddings are compared; None: the preset's (3)
    seeds: int | None = parameter(None, COUNT)


def runs_read(preset: str) -> list[RunConfig]:
    """The one-model runs (the chapter's model and its ladder), then the scale's seeds."""
    return model_chapter_configs(preset) + seed_part_configs(preset)


class Opening(NamedTuple):
    """What ``setup`` opens: the config, run and phases, the post-shift model, every value token of the task, the
    positions grouped by row and by column, and the seeds of the several-seed part."""

    cfg: RunConfig
    run: Run
    phases: Phases
    post: Model
    values: torch.Tensor
    rows: np.ndarray
    cols: np.ndarray
    seeds: int


def setup(p: Parameters) -> Opening:
    """The chapter's config, run and phases, its post-shift model, every value token of the task, the
    positions grouped by row and by column, and the seeds of the several-seed part (None: the preset's)."""
    cfg, run, phases = open_chapter(model_preset(p.preset, p.one_model), p.seed, p.overrides)
    seeds = p.seeds or chapter_sizes(p.preset).seeds
    d = cfg.data

    S = d.n_rows * d.n_cols
    values = task_values(d, p.value_samples)  # every value token the task uses
    rows, cols = position_groups(d.n_rows, d.n_cols)
    post = run.checkpoint(phases.post)
    print(f"value tokens from {values[0]:.2f} to {values[-1]:.2f} ({len(values)} tokens); {S} positions")
    return Opening(cfg, run, phases, post, values, rows, cols, seeds)


def silhouette_findings(by_seed: pd.DataFrame) -> list[str]:
    """One sentence per seed of ``matcomp.analysis.embeddings.silhouettes_by_seed``: its silhouette by column
    and by row at its first and last saved checkpoint, and how its final position embeddings group
    (``position_grouping``)."""
    sentences = []
    for seed, table in by_seed.groupby(level="seed"):
        first, last = table.iloc[0], table.iloc[-1]
        steps = table.index.get_level_values("step")
        if pd.isna(first["from drop"]):
            around = "; it has no drop"
        else:
            around = (f" ({abs(first['from drop']):,.0f} steps {'before' if first['from drop'] < 0 else 'after'} its "
                      f"drop to {abs(last['from drop']):,.0f} {'before' if last['from drop'] < 0 else 'after'})")
        grouping = position_grouping(table.iloc[[-1]]).iloc[0]
        sentences.append(f"Seed {seed}: by column {first['by column']:+.2f} → {last['by column']:+.2f} and by row "
                         f"{first['by row']:+.2f} → {last['by row']:+.2f} from step {steps[0]:,} to {steps[-1]:,}"
                         f"{around}; it ends grouped by {grouping}.")
    return sentences


def closing_values(values, norms, correlations: pd.DataFrame, scores: pd.DataFrame, silhouettes: pd.DataFrame,
                   phases, run) -> dict[str, str]:
    """What the chapter's closing sentences quote, by name (their text is the notebook's): the value tokens' norm
    curve (``values``, ``norms``) and which principal component reads sign and magnitude
    (``component_correlations``); the final position embeddings' silhouettes (``scores``) and their path from the
    pre- to the post-shift checkpoint (``silhouettes`` by step, ``phases`` the run's phases)."""
    sign_pc, size_pc = (correlations.loc[feature].abs().idxmax() for feature in ("sign(x)", "|x|"))
    pre, post, final = silhouettes.loc[phases.pre], silhouettes.loc[phases.post], scores.iloc[0]
    return {"emb_symmetry": f"{norm_symmetry(values, norms):.2f}", "emb_sign_pc": sign_pc,
            "emb_sign_r": f"{correlations.loc['sign(x)', sign_pc]:+.2f}", "emb_size_pc": size_pc,
            "emb_size_r": f"{correlations.loc['|x|', size_pc]:+.2f}",
            "emb_norm_lowest": f"{values[norms.argmin()].abs():.2f}",
            "emb_norm_highest": f"{values[norms.argmax()].abs():.2f}",
            "emb_shape": f"{run.config.data.n_rows}×{run.config.data.n_cols}",
            "emb_final_column": f"{final['by column']:+.2f}", "emb_final_row": f"{final['by row']:+.2f}",
            "emb_final_grouping": position_grouping(scores).iloc[0],
            "emb_pre_column": f"{pre['by column']:+.2f}", "emb_pre_row": f"{pre['by row']:+.2f}",
            "emb_pre_step": f"{phases.pre:,}", "emb_post_column": f"{post['by column']:+.2f}",
            "emb_post_row": f"{post['by row']:+.2f}", "emb_post_step": f"{phases.post:,}",
            "emb_drop": at_step(run.drop.half_step)}


def seed_findings(by_seed: pd.DataFrame, seed_task: str) -> list[str]:
    """The closing sentences on how the seeds of ``seed_task`` ("4×4") group their positions
    (``silhouettes_over_seeds``), a list as long as the seeds."""
    return [f"The {seed_task} seeds' silhouette by column / by row: "
            + "; ".join(f"seed {s}: {row['by column']:+.2f} / {row['by row']:+.2f}" for s, row in by_seed.iterrows())
            + ".",
            f"Of {len(by_seed)} seeds, " + ", ".join(f"{(by_seed['groups by'] == g).sum()} group their positions by {g}"
                                               for g in ("column", "row", "neither")) + "."]


# positions cluster by column (Fig. 7c), only after the drop (Fig. 10), and their norms dip at the middle row
# (WS Fig. 8): the silhouette's 0.1 and the dip's 2 sd are the book's bounds. The clusters form at the drop; the
# paper shows no way training moves them after it, so none declares a direction (``Claim.training``)
# claim (d), as the ladder judges it: a dip at the middle row that stands out (the book's bound; WS Fig. 8 shows it)
MIDDLE_ROW_DIP = Claim(Side(-2.0, above=False), ours=True)
KEY_NUMBERS = KeyNumbers(read_embeddings, (
    KeyNumber("column_silhouette", "position silhouette by column", Claim(Side(0.1), ours=True),
              tests=("position_column_clusters", "position_clusters_after_drop")),
    KeyNumber("column_minus_row", "by column − by row", Claim(Side(0, strict=True), ours=True),  # rows: not the paper's
              tests=("position_column_clusters",)),
    # untrained embeddings pass it too (−0.04 to −0.06)
    KeyNumber("column_silhouette_pre", "position silhouette by column, pre-shift",
              Claim(Side(0.1, above=False, strict=True), ours=True), pre_shift=True, check=CHECK,
              tests=("position_clusters_after_drop",)),
    # its mean norm in sd of the other rows' norms, from their mean
    KeyNumber("middle_row_z", "position norms: middle row's z", MIDDLE_ROW_DIP, tests=("position_norm_dip",)),
    # "align very closely to the final arrangement before the actual drop" (§3.3, Fig. 9), at the paper's last panel
    # before it; the final arrangement is the last checkpoint's, which training still moves (``MOVES``)
    KeyNumber("tokens_arranged_before_drop", "value tokens before the drop: correlation with their final arrangement",
              Claim(Side(0.9), ours=True, training=MOVES), tests=("token_embeddings_before_drop",))))


CHAPTER = ChapterSpec("embeddings", Parameters, runs_read, opening=Opening, key_numbers=KEY_NUMBERS)
