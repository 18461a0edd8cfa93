"""Every random stream of the package, in one place, so that no two uses share one by accident.

A run of seed s initialises its model from ``torch.manual_seed(s)`` (``seeded``), draws its training
batches from stream s·1000 + 1, its evaluation batches from s·1000 + 2 and, with the grid
position initialisation, that grid from s·1000 + 3 (``stream``). Analyses of a trained model draw
from 10⁶ + s (``analysis_generator``), apart from every training stream of seeds below 1000, and resample
their matrices from 2·10⁶ + s (``analysis_generator(10⁶ + s)``: ``key_numbers.resample_generator``, the bootstraps
of a head count's standard error); position permutations from their own seed (``permutation_generator``), and
the random masks of the identifiability count (``matcomp.analysis.variants``) from theirs (``mask_generator``).

>>> stream(2, TRAIN).initial_seed(), analysis_generator(2).initial_seed()
(2001, 1000002)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from matcomp import checks

TRAIN, EVAL, GRID = 1, 2, 3  # the streams of a training run: generator seed = seed * 1000 + stream
ANALYSIS_OFFSET = 10**6
MAX_SEED = (checks.MAX_GENERATOR_SEED - GRID) // 1000  # the largest run seed whose streams a generator takes
MAX_ANALYSIS_SEED = checks.MAX_GENERATOR_SEED - ANALYSIS_OFFSET  # the largest seed analysis_generator takes
MAX_TSNE_SEED = 2 ** 32 - 1  # the largest seed of numpy's RandomState, which sklearn's t-SNE layout draws from


def stream(seed: int, k: int) -> torch.Generator:
    """Generator ``k`` (``TRAIN``, ``EVAL``, ``GRID``) of a run of seed ``seed``. It is a CPU generator
    whatever device trains (as in the authors' ``train.py``), so a run's data do not depend on the
    device and a run saved on one device continues on another with the same batches."""
    return torch.Generator().manual_seed(checks.integer(seed, "seed", 0, MAX_SEED) * 1000 + k)


def analysis_generator(seed: int, name: str = "seed") -> torch.Generator:
    """The CPU generator of an analysis of a trained model; ``name``: the argument ``seed`` came as, which a
    seed that is not in [0, ``MAX_ANALYSIS_SEED``] is refused by."""
    return torch.Generator().manual_seed(ANALYSIS_OFFSET + checks.seed(seed, name, ANALYSIS_OFFSET))


def permutation_generator(seed: int, name: str = "seed") -> torch.Generator:
    """The CPU generator of the position permutation of seed ``seed`` (refused by ``name``, as above)."""
    return torch.Generator().manual_seed(checks.seed(seed, name))


def mask_generator(seed: int, name: str = "seed") -> torch.Generator:
    """The CPU generator of the random masks (and the random factors at which their identifiability is read)
    of seed ``seed``: a task's masks alone, apart from any model's (refused by ``name``, as above)."""
    return torch.Generator().manual_seed(checks.seed(seed, name))


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Within the block, PyTorch's global CPU generator starts from ``seed`` (a model's
    initialisation); outside it, the global stream is as if the block had not run."""
    seed = checks.seed(seed, "seed")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield
