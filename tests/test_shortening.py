"""The shortening chapter's runs seed by seed: plain and changed training on the same seeds."""

import numpy as np

from matcomp.analysis.shortening import bias_ends, seed_curves
from matcomp.runs.store import get_or_train


def test_seed_curves_hold_plain_and_changed_training_of_each_seed(micro, store):
    micro = micro.override({"train.steps": 200, "train.checkpoint_every": 200, "train.checkpoint_steps": []})
    changed = {"bias": micro.override({"train.attention_bias": 2.0, "train.attention_bias_steps": 10,
                                       "train.steps": 20}),
               "lr": micro.override({"train.lr": 6e-3, "train.steps": 30})}
    curves, levels = seed_curves(micro, changed, [micro.train.seed])
    runs = curves[micro.train.seed]
    assert list(curves) == [micro.train.seed] and list(runs) == ["plain", "bias", "lr"]
    assert runs["plain"].step.max() == 30 and runs["bias"].step.max() == 20  # plain cut at the longest change
    plain = get_or_train(micro, progress=False)
    assert runs["plain"].L_mask.tolist() == plain.metrics[plain.metrics.step <= 30].L_mask.tolist()
    np.testing.assert_equal(levels[micro.train.seed], plain.drop.plateau)
    assert bias_ends(changed) == {"bias": 10}
