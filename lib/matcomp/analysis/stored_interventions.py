"""The observed-entries chapter's interventions on one post-shift model (NeurIPS §3.2.1), stored beside its run
(``matcomp.runs.derived``): on the paper's model (hidden 768) the forward passes of every intervention and
permutation take minutes on a CPU, so the default build reads its table shipped. A module of its own so that the
code the key numbers hash is not changed by it (as ``stored_probes``)."""

from __future__ import annotations

import dataclasses

import pandas as pd

from matcomp.analysis.interventions import attention_interventions
from matcomp.analysis.positions import permuted_losses
from matcomp.data import Batch, matrix_count, sample_batch
from matcomp.models.bert import MatrixBert
from matcomp.runs.derived import Derivation, load_or_compute
from matcomp.runs.run import Run
from matcomp.seeding import analysis_generator

PERMUTED = "positions permuted"  # the row of the permuted positions' mean losses
CONDITION = "intervention"  # the interventions table's index, named as a stored table's must be


def post_shift_interventions(post: MatrixBert, pre: MatrixBert, batch: Batch,
                             permutations: int) -> dict[str, pd.DataFrame]:
    """L_obs and L_mask of ``post`` on ``batch`` under each attention intervention, with the pre-shift model ``pre``
    as the donor of Q, K, V, and with its positions permuted (the mean over ``permutations`` seeded permutations):
    ``"interventions"``; and the permutations' spread (``permuted_losses``): ``"permuted"``."""
    table = attention_interventions(post, pre, batch, "pre-shift")
    permuted = permuted_losses(post, batch, seeds=range(permutations))
    table.loc[PERMUTED] = permuted.loc[["L_obs", "L_mask"], "mean"].tolist()
    return {"interventions": table, "permuted": permuted}


def interventions_derivation(run: Run, pre: int, post: int, samples: int, eval_seed: int,
                             permutations: int) -> Derivation:
    """``post_shift_interventions`` of checkpoint ``post`` of ``run`` (``pre`` its donor) on ``samples`` matrices of
    its task from ``analysis_generator(eval_seed)``, as the chapter draws them. Named by its run, so that one run's
    tables never replace another's among the shipped ones."""
    data = run.config.data
    samples = matrix_count(data, samples, "samples")
    params = {"data": dataclasses.asdict(data), "samples": samples, "eval_seed": eval_seed,
              "permutations": permutations}

    def compute() -> dict[str, pd.DataFrame]:
        batch = sample_batch(data, samples, analysis_generator(eval_seed))
        tables = post_shift_interventions(run.bert(post), run.bert(pre), batch, permutations)
        return {**tables, "interventions": tables["interventions"].rename_axis(CONDITION)}

    return Derivation(f"interventions_{run.path.name}", compute, [(run, pre), (run, post)], params)


def stored_interventions(run: Run, pre: int, post: int, samples: int, eval_seed: int,
                         permutations: int) -> dict[str, pd.DataFrame]:
    """``interventions_derivation``'s tables: shipped, stored, or computed and stored; the interventions' index
    unnamed, as ``post_shift_interventions`` gives it."""
    tables = load_or_compute(interventions_derivation(run, pre, post, samples, eval_seed, permutations))
    return {**tables, "interventions": tables["interventions"].rename_axis(None)}
