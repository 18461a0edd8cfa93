"""What the chapters measure, one module per family of experiments, as numbers and tables.

``evaluation`` (losses of a trained model, the copy check), ``phases`` (the pre- and post-shift
checkpoints), ``seeds`` (the drop over seeds), ``interventions`` (head ablation, model switching),
``patching`` (activation patching), ``positions`` (permuted positions), ``heads`` (head families),
``embeddings`` (value and position embeddings), ``probing`` (linear probes), ``solvers`` (nuclear-norm
minimisation and the other completion methods), ``baselines`` (the BERT scored against them),
``key_numbers`` (each one-model finding's numbers on one run, for the ladders), ``progress`` (progress
measures), ``alarm`` (the prospective alarm), ``components`` (Fig. 8), ``shortening``, ``variants``
(width, depth, sizes, ranks), ``ood`` (other distributions and shapes) and ``gpt`` (App. G).

May import the core modules, ``matcomp.models`` and ``matcomp.runs``; never the book.
"""
