"""The shortening chapter's runs seed by seed: plain and changed training on the same seeds."""

import numpy as np
import pytest

from matcomp.analysis.shortening import bias_ends, seed_curves, with_and_without
from matcomp.runs.store import get_or_train


def test_seed_curves_hold_plain_and_changed_training_of_each_seed(micro, store):
    micro = micro.override({"train.steps": 200, "train.checkpoint_every": 200, "train.checkpoint_steps": []})
    changed = {"bias": micro.override({"train.attention_bias": 2.0, "train.attention_bias_steps": 10,
                                       "train.steps": 20}),
               "lr": micro.override({"train.lr": 6e-3, "train.steps": 30})}
    kept_on = micro.override({"train.attention_bias": 2.0, "train.attention_bias_schedule": "constant"})
    seed = micro.train.seed
    curves, levels = seed_curves({seed: get_or_train(micro, progress=False)},
                                 {name: {seed: get_or_train(c, progress=False)} for name, c in changed.items()})
    runs = curves[micro.train.seed]
    assert list(curves) == [micro.train.seed] and list(runs) == ["plain", "bias", "lr"]
    assert runs["plain"].step.max() == 30 and runs["bias"].step.max() == 20  # plain cut at the longest change
    plain = get_or_train(micro, progress=False)
    assert runs["plain"].L_mask.tolist() == plain.metrics[plain.metrics.step <= 30].L_mask.tolist()
    np.testing.assert_equal(levels[micro.train.seed], plain.drop.plateau)
    assert bias_ends(changed | {"kept on": kept_on}) == {"bias": 10}  # a bias kept on never ends


def test_a_kept_on_change_is_read_with_it_in_training_and_without_it_in_evaluation(micro, store):
    micro = micro.override({"train.steps": 100, "train.eval_every": 10, "train.checkpoint_every": 100,
                            "train.checkpoint_steps": []})
    kept_on = micro.override({"train.attention_bias": 50.0, "train.attention_bias_schedule": "constant"})
    arms = {name: {micro.train.seed: get_or_train(c, progress=False)}
            for name, c in (("plain", micro), ("kept on", kept_on))}
    table = with_and_without(arms, steps=40)
    assert table.index.tolist() == [("plain", micro.train.seed), ("kept on", micro.train.seed)]
    metrics = get_or_train(kept_on, progress=False).metrics
    last = metrics[metrics.step > 60]
    assert table.loc[("kept on", micro.train.seed), "L_mask with the change"] == pytest.approx(last.L_mask.mean())
    assert table.loc[("kept on", micro.train.seed), "L_mask without it"] == pytest.approx(last.eval_L_mask.mean())
    assert last.eval_L_mask.notna().sum() == 4  # steps 70, 80, 90, 100
