"""The probing chapter's probe tables of one checkpoint, stored beside its run (``matcomp.runs.derived``): on the
paper's model (hidden 768) the three probes' forward passes over 2,304 matrices take minutes on a CPU, so the
default build reads them shipped rather than computing them. A module of its own so that the code the key numbers
hash (``key_numbers`` imports ``probing``) is not changed by it."""

from __future__ import annotations

import dataclasses

import pandas as pd

from matcomp.analysis.probing import PROBE_TARGETS, probe_layers
from matcomp.data import matrix_count, sample_batch
from matcomp.runs.derived import Derivation, load_or_compute
from matcomp.runs.run import Run
from matcomp.seeding import analysis_generator


def probes_derivation(run: Run, step: int, train_matrices: int, test_matrices: int,
                      targets=PROBE_TARGETS) -> Derivation:
    """``probe_layers`` of checkpoint ``step`` of ``run`` for each of ``targets``, fitted on ``train_matrices`` of
    its task (from ``analysis_generator(0)``) and scored on ``test_matrices`` (from ``analysis_generator(1)``), as
    the probing chapter draws them: one table a target. Named by its run, so that one run's tables never replace
    another's among the shipped ones."""
    data = run.config.data
    train_matrices = matrix_count(data, train_matrices, "train_matrices")
    test_matrices = matrix_count(data, test_matrices, "test_matrices")
    targets = tuple(targets)
    unknown = sorted(set(targets) - set(PROBE_TARGETS))
    if unknown or not targets:
        raise ValueError(f"targets must be some of {PROBE_TARGETS}; got {list(targets)}")
    params = {"data": dataclasses.asdict(data), "train_matrices": train_matrices, "test_matrices": test_matrices,
              "targets": list(targets)}

    def compute() -> dict[str, pd.DataFrame]:
        model = run.bert(step)
        train = sample_batch(data, train_matrices, analysis_generator(0))
        test = sample_batch(data, test_matrices, analysis_generator(1))
        return {target: probe_layers(model, train, test, target) for target in targets}

    return Derivation(f"probe_layers_{run.path.name}", compute, [(run, step)], params)


def stored_probes(run: Run, step: int, train_matrices: int, test_matrices: int,
                  targets=PROBE_TARGETS) -> dict[str, pd.DataFrame]:
    """``probes_derivation``'s tables (target -> ``probe_layers`` table): shipped, stored, or computed and stored."""
    return load_or_compute(probes_derivation(run, step, train_matrices, test_matrices, targets))
