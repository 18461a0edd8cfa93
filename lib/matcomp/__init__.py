"""matcomp: abrupt learning of a BERT on low-rank matrix completion (Gopalani, Lubana & Hu, 2024).

The package is in layers, each a folder that may import only the layers before it (a test walks
the imports to keep it so):

- core, at the top level: ``config`` (the frozen run configuration), ``overrides`` (config changes as a user
  types them), ``presets`` (named configs, and which one a command or a chapter means after the environment's
  overrides), ``sizes`` (the chapters' experiment sizes at each preset), ``arguments`` (the command line's
  argument types, shared by ``cli`` and the book's commands), ``checks`` (the argument checks of the public
  functions), ``limits`` (what this machine's memory and disk hold), ``console`` (a line for whoever started
  the work), ``tokenizer`` (value <-> id maps of both models), ``data`` (the sampler and its typed ``Batch``),
  ``metrics`` (L, L_obs, L_mask), ``drop`` (plateau, drop and final losses), ``seeding`` (every random
  stream) and ``paper`` (the paper's reported numbers);
- ``models``: the BERT, the GPT, the factory, the attention hooks and the recipe changes;
- ``runs``: training, the run store, run folders, shipped runs;
- ``analysis``: one module per family of experiments;
- ``book``: the chapters' declarations and openings, plots, tables, widgets, sweeps and the book's commands;
- on top: ``main`` (``python -m matcomp``: ``cli``'s commands, which build runs without the book, and the
  book's), ``bench`` and ``remote`` (the paper-scale pipeline of a lent GPU).
"""

import importlib

# the package's shortcuts, imported on first use: ``import matcomp.book.build.sweep`` (a sweep's kernel) does not
# pay for torch and transformers
_SHORTCUTS = {
    "matcomp.config": ["DataConfig", "ModelConfig", "RunConfig", "TrainConfig"],
    "matcomp.data": ["Batch", "sample_batch"],
    "matcomp.drop": ["Drop", "detect_drop"],
    "matcomp.metrics": ["masked_mse"],
    "matcomp.models.bert": ["MatrixBert"],
    "matcomp.models.factory": ["build_model"],
    "matcomp.presets": ["PRESETS", "preset_config"],
    "matcomp.runs.run": ["Run", "open_run"],
    "matcomp.runs.store": ["get_or_train"],
    "matcomp.tokenizer": ["Tokenizer"],
}
_HOME = {name: module for module, names in _SHORTCUTS.items() for name in names}
__all__ = sorted(_HOME)


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module 'matcomp' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOME[name]), name)
