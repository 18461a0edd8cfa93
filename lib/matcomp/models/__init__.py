"""The models and everything that reaches inside them.

``bert`` (the paper's BERT with a linear read-out), ``gpt`` (the autoregressive GPT-2 of App. G),
``factory`` (a model of either architecture from its config), ``hooks`` (the one scoped mechanism
for reaching inside attention: biases, edits, recording, per-head outputs) and ``recipe`` (the
changes to the paper's training recipe: component training, grid positions, the attention bias).

May import the core modules (``matcomp.config``, ``matcomp.data``, ...); nothing above them.
"""
