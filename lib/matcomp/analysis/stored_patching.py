"""The attention-patching chapter's negation patching of one post-shift model (NeurIPS App. F), stored beside its run
(``matcomp.runs.derived``): on the paper's model (hidden 768) a patched forward pass for every layer and every
head takes minutes on a CPU, so the default build reads its tables shipped. A module of its own so that the code
the key numbers hash is not changed by it (as ``stored_probes``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable
from typing import cast

import pandas as pd
import torch

from matcomp.analysis.patching import all_layers, last_layer, negation_patching, per_head, per_layer
from matcomp.data import Batch, matrix_count, sample_batch
from matcomp.models.bert import MatrixBert
from matcomp.runs.derived import Derivation, load_or_compute
from matcomp.runs.run import Run
from matcomp.seeding import analysis_generator


def patching_tables(model: MatrixBert, batch: Batch, layers: int, heads: int) -> dict[str, pd.DataFrame]:
    """``negation_patching`` of ``model`` (``layers`` of ``heads`` heads) on ``batch``: every layer at once, the last,
    each layer alone, with the clean and corrupted runs (``"layers"``); and every head alone (``"heads"``, indexed
    by layer and head)."""
    Sites = dict[Hashable, torch.Tensor]
    sites = cast(Sites, {**all_layers(layers, heads), **last_layer(layers, heads), **per_layer(layers, heads)})
    return {"layers": negation_patching(model, batch, sites),
            "heads": negation_patching(model, batch, cast(Sites, per_head(layers, heads)), references=False)}


def patching_derivation(run: Run, step: int, samples: int, eval_seed: int) -> Derivation:
    """``patching_tables`` of checkpoint ``step`` of ``run`` on ``samples`` matrices of its task from
    ``analysis_generator(eval_seed)``, as the chapter draws them. Named by its run, so that one run's tables never
    replace another's among the shipped ones."""
    data = run.config.data
    samples = matrix_count(data, samples, "samples")
    params = {"data": dataclasses.asdict(data), "samples": samples, "eval_seed": eval_seed}

    def compute() -> dict[str, pd.DataFrame]:
        m = run.config.model
        return patching_tables(run.bert(step), sample_batch(data, samples, analysis_generator(eval_seed)), m.layers,
                               m.heads)

    return Derivation(f"patching_{run.path.name}", compute, [(run, step)], params)


def stored_patching(run: Run, step: int, samples: int, eval_seed: int) -> dict[str, pd.DataFrame]:
    """``patching_derivation``'s tables: shipped, stored, or computed and stored."""
    return load_or_compute(patching_derivation(run, step, samples, eval_seed))
