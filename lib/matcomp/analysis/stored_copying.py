"""The copying-phase chapter's tests on one pre-shift model (NeurIPS §3.1.1, Table 1, and §3.1.2), stored beside its
run (``matcomp.runs.derived``): on the paper's model (hidden 768) the copy table's 3,072 matrices and the
interventions take minutes on a CPU, so the default build reads them shipped. A module of its own, so that the code
the key numbers hash is not changed by it (as ``stored_interventions``)."""

from __future__ import annotations

import dataclasses

import pandas as pd

from matcomp.analysis.evaluation import copy_check, losses
from matcomp.analysis.interventions import attention_interventions
from matcomp.data import Batch, matrix_count, sample_batch
from matcomp.models.bert import MatrixBert
from matcomp.runs.derived import Derivation, load_or_compute
from matcomp.runs.run import Run
from matcomp.seeding import analysis_generator

POST_SHIFT_MODEL = "(post-shift model)"  # the interventions table's last row: the donor itself, for scale
CONDITION = "intervention"  # the interventions table's index, named as a stored table's must be


def pre_shift_interventions(pre: MatrixBert, post: MatrixBert, batch: Batch) -> pd.DataFrame:
    """L_obs and L_mask of the pre-shift model ``pre`` on ``batch`` under each attention intervention, ``post`` the
    donor of Q, K, V (``attention_interventions``), and of ``post`` itself as the last row."""
    table = attention_interventions(pre, post, batch, "post-shift")
    table.loc[POST_SHIFT_MODEL] = [losses(post, batch)[name] for name in table.columns]
    return table


def copying_derivation(run: Run, pre: int, post: int, copy_samples: int, ablation_samples: int,
                       eval_seed: int) -> Derivation:
    """Table 1 of checkpoint ``pre`` of ``run`` (``copy_check``, ``copy_samples`` matrices a cell): ``"copy"``; and
    its ``pre_shift_interventions`` with checkpoint ``post`` as the donor, on ``ablation_samples`` matrices from
    ``analysis_generator(eval_seed)``, as the chapter draws them: ``"interventions"``. Named by its run, so that one
    run's tables never replace another's among the shipped ones."""
    data = run.config.data
    copy_samples = matrix_count(data, copy_samples, "copy_samples")
    ablation_samples = matrix_count(data, ablation_samples, "ablation_samples")
    params = {"data": dataclasses.asdict(data), "copy_samples": copy_samples, "ablation_samples": ablation_samples,
              "eval_seed": eval_seed}

    def compute() -> dict[str, pd.DataFrame]:
        model = run.bert(pre)
        batch = sample_batch(data, ablation_samples, analysis_generator(eval_seed))
        return {"copy": copy_check(model, data, copy_samples, eval_seed).set_index(["inputs", "m"]),
                "interventions": pre_shift_interventions(model, run.bert(post), batch).rename_axis(CONDITION)}

    return Derivation(f"copying_{run.path.name}", compute, [(run, pre), (run, post)], params)


def stored_copying(run: Run, pre: int, post: int, copy_samples: int, ablation_samples: int,
                   eval_seed: int) -> dict[str, pd.DataFrame]:
    """``copying_derivation``'s tables (shipped, stored, or computed and stored) as the chapter computes them: the
    copy table tidy, as ``copy_check`` gives it, the interventions' index unnamed."""
    tables = load_or_compute(copying_derivation(run, pre, post, copy_samples, ablation_samples, eval_seed))
    return {"copy": tables["copy"].reset_index(), "interventions": tables["interventions"].rename_axis(None)}
