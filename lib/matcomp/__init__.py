"""matcomp: abrupt learning of a BERT on low-rank matrix completion (Gopalani, Lubana & Hu, 2024).

The modules, each small and named for what it holds:

- ``config``     frozen run configuration (data, model, train) with validation and a stable hash
- ``presets``    named configurations: ``smoke``, ``cpu``, ``paper``, ``paper12``
- ``tokenizer``  the paper's value <-> token-id map
- ``data``       samplers for low-rank / full-rank matrices and masks, returning a typed ``Batch``
- ``model``      the paper's BERT with a linear read-out, attention implementation switchable
- ``metrics``    pooled L, L_obs, L_mask
- ``training``   the online Adam training loop with checkpoints and exact resume
- ``store``      the on-disk run store: ``get_or_train(cfg)`` -> ``Run``
- ``drop``       detection of the plateau and of the sudden drop
- ``bench``      throughput benchmark against a loop equivalent to the paper's code
- ``chapter``    a chapter's parameters -> config (from the environment too), and its checkpoints
- ``evaluation`` predictions and pooled losses of a trained model, the copy check
- ``interventions`` attention edits and recording, head ablation, weight transplant (model switching)
- ``patching``   activation patching of per-head attention outputs
- ``positions``  seeded permutations of the position embeddings
- ``heads``      attention-head family scores, classification, structured masks, group ablation
- ``baselines``  nuclear-norm minimisation (cvxpy), soft-impute and rank-r ALS
- ``representations`` embedding structure and linear probes of hidden states, as numbers
- ``progress``   progress measures on every checkpoint, and how long before the drop each moves
- ``components`` parameter groups, for training one component of a finished run at a time
- ``biases``     changes to the recipe that may shorten the plateau (grid positions, attention bias)
- ``ood``        a trained model on other distributions, ranks and shapes, beside nuclear-norm minimisation
- ``sweep``      a chapter over a parameter grid with papermill, and the table of what it records
- ``paper``      the paper's reported numbers, with their sources
- ``plots``, ``tables``, ``widgets``  the chapters' figures, tables and interactive explorers
"""

import importlib

# the package's shortcuts, imported on first use: ``import matcomp.sweep`` (a sweep's kernel) does not
# pay for torch and transformers
_SHORTCUTS = {
    "matcomp.config": ["DataConfig", "ModelConfig", "RunConfig", "TrainConfig"],
    "matcomp.data": ["Batch", "sample_batch"],
    "matcomp.drop": ["Drop", "detect_drop"],
    "matcomp.metrics": ["masked_mse"],
    "matcomp.model": ["MatrixBert", "build_model"],
    "matcomp.presets": ["PRESETS", "preset"],
    "matcomp.store": ["Run", "get_or_train", "open_run"],
    "matcomp.tokenizer": ["Tokenizer"],
}
_HOME = {name: module for module, names in _SHORTCUTS.items() for name in names}
__all__ = sorted(_HOME)


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module 'matcomp' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOME[name]), name)
