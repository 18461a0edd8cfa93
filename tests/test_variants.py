"""One-property variants of a run (App. H, I): their overrides, runs, table and the mixture's learning order."""

import numpy as np
import pandas as pd
import pytest

from matcomp.analysis.variants import (
    learning_order,
    mixture_overrides,
    variant_configs,
    variant_overrides,
    variant_summary,
    variant_table,
)
from matcomp.runs.store import get_or_train


def test_the_runs_own_value_is_the_run_itself_and_others_change_one_field(micro):
    variants = variant_overrides(micro, {"depth": [1, 2], "size": [3, 4]}, 30)
    assert variants == {("depth", 1): {}, ("depth", 2): {"model.layers": 2, "train.steps": 30},
                        ("size", 3): {}, ("size", 4): {"data.n_rows": 4, "data.n_cols": 4, "train.steps": 30}}
    with pytest.raises(ValueError, match="model.hidden"):
        variant_overrides(micro, {"width": [0]}, 30)
    with pytest.raises(ValueError, match=r"steps must be in \[1, train.steps = 40\]"):
        variant_overrides(micro, {"depth": [2]}, 41)
    with pytest.raises(ValueError, match="axis must be one of"):
        variant_overrides(micro, {"heads": [2]}, 30)


def test_variant_table_reads_each_run_within_the_steps(micro, store):
    cfg = micro.override({"train.steps": 300, "train.checkpoint_every": 300, "train.checkpoint_steps": []})
    configs = variant_configs(cfg, variant_overrides(cfg, {"depth": [1, 2]}, 200), seeds=[0, 1])
    runs = {key: get_or_train(c, progress=False) for key, c in configs.items()}
    assert list(runs) == [("depth", 1, 0), ("depth", 1, 1), ("depth", 2, 0), ("depth", 2, 1)]
    assert runs["depth", 1, 0].config == cfg and runs["depth", 2, 1].config.model.layers == 2
    assert runs["depth", 2, 1].config.train.seed == 1 and runs["depth", 2, 0].config.train.steps == 200
    table = variant_table(runs, 200)
    assert table.loc[("depth", 2, 0), "parameters"] > table.loc[("depth", 1, 0), "parameters"]
    assert table.loc[("depth", 1, 0), "last step"] == 200 and table["L_mask after drop"].isna().all()  # no drop


def test_variant_overrides_stop_after_the_drop_only_for_the_changed_runs(micro):
    variants = variant_overrides(micro, {"depth": [1, 2]}, 30, after_drop=500)
    assert variants["depth", 1] == {} and variants["depth", 2]["train.stop_after_drop"] == 500


def test_variant_summary_reads_the_spread_of_the_drop_steps():
    index = pd.MultiIndex.from_tuples([(a, v, s) for a, v in (("width", 64), ("width", 32), ("width", 128),
                                                               ("depth", 6)) for s in (0, 1, 2)],
                                      names=["axis", "value", "seed"])
    drops = [5000, 6500, 11000, 12000, 13000, 15000, None, None, None, 4000, 9000, None]
    after = [0.03] * 3 + [0.04] * 3 + [float("nan")] * 3 + [0.02, 0.02, float("nan")]
    table = pd.DataFrame({"drop step": pd.array(drops, dtype="Int64"), "L_mask after drop": after}, index=index)
    base = table.iloc[:3].rename(index={"width": "depth", 64: 4})  # depth 4 is the chapter's run too
    table = pd.concat([table, base])
    summary = variant_summary(table, own={"width": 64, "depth": 4}, budget=20000)
    assert summary.loc[("width", 64), "verdict"] == "the chapter's run"
    assert summary.loc[("width", 32), "verdict"] == "later"  # 12,000..15,000 after every seed of width 64
    assert summary.loc[("width", 128), "verdict"] == "later" and summary.loc[("width", 128), "dropped"] == 0
    assert summary.loc[("depth", 6), "verdict"] == "within the spread"
    row = summary.loc[("width", 32)]
    assert (row["seeds"], row["dropped"], row["first"], row["last"]) == (3, 3, 12000, 15000)
    assert (row["mean drop"], row["sd"]) == (13333, 1528)  # in whole steps
    assert summary.loc[("depth", 6), "L_mask after drop"] == pytest.approx(0.02)
    single = variant_summary(table.xs(0, level="seed", drop_level=False), own={"width": 64, "depth": 4}, budget=20000)
    assert single.loc[("width", 32), "verdict"] == "one seed: no verdict"


def test_learning_order_sorts_sizes_by_their_drop():
    step = np.arange(100, 20001, 100)
    metrics = pd.DataFrame({"step": step, "eval_L_mask": 0.1,
                            "eval_L_mask_n3": np.where(step < 12000, 0.11, 0.02),
                            "eval_L_mask_n4": np.where(step < 8000, 0.11, 0.03),
                            "eval_L_mask_n5": np.full(len(step), 0.11)})
    order = learning_order(metrics, [3, 4, 5], window=1)
    assert list(order.index) == ["4x4", "3x3", "5x5"]
    assert order["drop step"].tolist()[:2] == [8000, 12000] and pd.isna(order["drop step"].iloc[2])
    assert mixture_overrides([3, 5, 4]) == {"data.sizes": [3, 5, 4], "data.rank": 1, "data.n_rows": 5, "data.n_cols": 5,
                                            "train.eval_every": 25, "train.eval_batch": 256}


def test_the_order_lines_and_table_tell_resolved_gaps_from_ties_over_seeds():
    from types import SimpleNamespace

    from matcomp.analysis.variants import mixture_orders, order_resolution
    from matcomp.book.chapters.sizes_ranks import order_lines, order_table
    from matcomp.presets import preset_config

    step = np.arange(25, 20001, 25)

    def mixture(d3, d4, d5):
        drops = {3: d3, 4: d4, 5: d5}
        return SimpleNamespace(metrics=pd.DataFrame({"step": step, "eval_L_mask": 0.1, **{
            f"eval_L_mask_n{n}": np.where(step < (d or 10**6), 0.11, 0.02) for n, d in drops.items()}}))

    orders = mixture_orders({0: mixture(11000, 11050, 15000), 1: mixture(9000, 12000, None)}, [3, 4, 5], window=1)
    assert orders.loc[(0, "4x4"), "drop step"] == 11050 and list(orders.loc[1].index) == ["3x3", "4x4", "5x5"]
    resolution = order_resolution(preset_config("cpu").override(mixture_overrides([3, 4, 5])))
    assert resolution == 125  # 5 evaluations, 25 steps apart
    seed0, seed1 = order_lines(orders, resolution)
    assert seed0 == "Seed 0: 3x3 (11,000) ≈ 4x4 (11,050) < 5x5 (15,000)."
    assert seed1 == "Seed 1: 3x3 (9,000) < 4x4 (12,000) < 5x5 (no drop)."
    pairs = order_table(orders, resolution)
    assert pairs.loc["3x3 before 4x4"].tolist() == [2, 2, "+50, +3,000", 1]
    assert pairs.loc["4x4 before 5x5"].tolist() == [1, 1, "+3,950", 1]


def _linked(observed):
    """The rank-1 criterion by hand, as an oracle: union-find over rows and columns joined by observed entries."""
    m, n = observed.shape
    parent = list(range(m + n))

    def root(a):
        while parent[a] != a:
            a = parent[a]
        return a
    for i, j in observed.nonzero().tolist():
        parent[root(i)] = root(m + j)
    return [[root(i) == root(m + j) for j in range(n)] for i in range(m)]


def test_undetermined_entries_at_rank_1_are_those_whose_row_and_column_are_not_linked():
    import torch

    from matcomp.analysis.variants import undetermined, undetermined_fraction
    from matcomp.data import random_mask

    mask = torch.tensor([[1, 0, 0],
                         [1, 1, 0],
                         [0, 0, 1]], dtype=torch.bool)  # rows 0, 1 and columns 0, 1 linked; row 2 with column 2
    assert undetermined(mask[None])[0].tolist() == [[False, False, True],
                                                    [False, False, True],
                                                    [True, True, False]]
    assert not undetermined(torch.ones(1, 3, 4, dtype=torch.bool)).any()
    masks = random_mask(300, 4, 5, 0.5, torch.Generator().manual_seed(1))
    found = undetermined(masks)
    assert found.any()  # the oracle is tested on masks that leave some entries free
    for mask, free in zip(masks, found):
        assert free.tolist() == [[not seen and not link for seen, link in zip(*row)]
                                 for row in zip(mask.tolist(), _linked(mask))]
    small, large = undetermined_fraction(3, 3, 0.3, samples=4000), undetermined_fraction(5, 5, 0.3, samples=4000)
    assert 0.2 < small < 0.3 and 0.005 < large < 0.04  # 24% and 2% in the sizes chapter


def test_undetermined_entries_at_rank_2_need_two_entries_in_their_row_and_column():
    import torch

    from matcomp.analysis.variants import identifiability, undetermined

    one_missing = torch.ones(1, 3, 3, dtype=torch.bool)
    one_missing[0, 2, 2] = False  # 8 entries seen, 8 degrees of freedom, every row and column seen twice
    assert not undetermined(one_missing, rank=2).any()
    thin_row = torch.ones(1, 4, 4, dtype=torch.bool)
    thin_row[0, 0, 1:] = False  # row 0 seen once: its three missing entries free at rank 2, fixed at rank 1
    assert undetermined(thin_row, rank=2)[0, 0, 1:].all() and not undetermined(thin_row, rank=2)[0, 1:].any()
    assert not undetermined(thin_row, rank=1).any()
    table = identifiability([(6, 6, 1), (6, 6, 2), (7, 7, 2)], 0.3, samples=2000)
    free = table["missing undetermined"]
    assert free["6×6 rank 1"] < 0.01 < free["7×7 rank 2"] < 0.05 < free["6×6 rank 2"] < 0.15  # 0.4 %, 2.6 %, 9.1 %
    assert table["degrees of freedom"].tolist() == [11.0, 20.0, 24.0]


def test_the_mixture_values_quote_the_resolution_the_run_alone_and_each_sizes_floor():
    from types import SimpleNamespace

    from matcomp.analysis.variants import mixture_overrides
    from matcomp.book.chapters.sizes_ranks import mixture_values
    from matcomp.presets import preset_config

    cfg = preset_config("cpu")
    orders = pd.DataFrame({"final L_mask": [0.03, 0.05, 0.01, 0.03]},
                          index=pd.MultiIndex.from_product([[0, 1], ["3x3", "4x4"]], names=["seed", "size"]))
    alone = SimpleNamespace(drop=SimpleNamespace(half_step=5060))
    values = mixture_values(orders, cfg.override(mixture_overrides([3, 4])), cfg, alone, [3, 4])
    assert (values["mix_eval_every"], values["mix_resolution"]) == ("25", "125")  # 5 evaluations, 25 steps apart
    assert (values["mix_alone"], values["mix_alone_drop"]) == ("4x4", "at step 5,060")
    assert values["mix_final"] == "3x3 0.020, 4x4 0.040" and values["mix_p_mask"] == "0.3"
    assert values["mix_undetermined"].startswith("3x3 ") and ", 4x4 " in values["mix_undetermined"]
