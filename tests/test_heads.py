import pandas as pd
import pytest
import torch

from matcomp.analysis.evaluation import losses
from matcomp.analysis.heads import (
    SCORES,
    classify_heads,
    family_counts,
    family_text,
    fig5_mask,
    group_ablation,
    head_scores,
    heads_by_family,
    longest_column,
    longest_column_margin,
    longest_runs,
    map_scores,
    matrix_masses,
    mean_maps,
    resampled_counts,
    score_baselines,
    separating_mask,
)
from matcomp.config import DataConfig, ModelConfig
from matcomp.data import random_mask, sample_batch
from matcomp.models.factory import build_model

M, N_COLS = 4, 5  # a non-square shape catches row/column mix-ups
S = M * N_COLS


def normalised(pattern: torch.Tensor) -> torch.Tensor:
    """Attention maps from a 0/1 pattern (..., S, S): uniform over each query's chosen keys."""
    pattern = pattern.float()
    return pattern / pattern.sum(-1, keepdim=True)


def synthetic_maps(batch: int) -> torch.Tensor:
    """(batch, 4, S, S): a row head, a column head, an identity head and a uniform head."""
    row, col = torch.arange(S) // N_COLS, torch.arange(S) % N_COLS
    patterns = [row[:, None] == row[None, :], col[:, None] == col[None, :], torch.eye(S, dtype=torch.bool),
                torch.ones(S, S, dtype=torch.bool)]
    return torch.stack([normalised(p) for p in patterns]).expand(batch, 4, S, S)


def test_synthetic_row_column_identity_and_uniform_heads_are_classified():
    observed = random_mask(32, M, N_COLS, 0.3, torch.Generator().manual_seed(0))
    scores = map_scores(synthetic_maps(32), observed)
    table = classify_heads(scores, score_baselines(observed))
    assert list(table.families) == [{"row"}, {"column"}, {"identity"}, set()]
    assert list(table.near_misses) == ["", "", "", ""]
    assert scores.loc[0, "row"] == pytest.approx((N_COLS - 1) / N_COLS)  # self excluded
    assert scores.loc[1, "column"] == pytest.approx((M - 1) / M)


def test_uniform_attention_scores_its_baselines():
    for observed in (random_mask(16, M, N_COLS, 0.3, torch.Generator().manual_seed(1)),
                     fig5_mask(M, N_COLS).expand(3, M, N_COLS)):
        uniform = torch.full((len(observed), 2, S, S), 1 / S)
        scores, base = map_scores(uniform, observed), score_baselines(observed)
        assert list(scores.columns) == list(SCORES)
        for name in SCORES:
            if not scores[name].isna().all():  # masked_row needs a row with one observed entry
                assert scores[name].tolist() == pytest.approx([base[name]] * 2), name
    assert not map_scores(uniform, observed)["masked_row"].isna().any()  # fig5 has such rows


def test_masked_row_longest_column_and_mask_ignore_heads():
    mask = fig5_mask(M, N_COLS)  # rows 2 and 3 missing, keeping columns 1 and 3
    observed = mask.flatten()
    row, col = torch.arange(S) // N_COLS, torch.arange(S) % N_COLS
    kept = {2: 2 * N_COLS + 1, 3: 3 * N_COLS + 3}
    to_kept = torch.ones(S, S, dtype=torch.bool)  # missing queries of a masked row: its kept entry;
    for q in range(S):                            # other queries: uniform
        if row[q].item() in kept and not observed[q]:
            to_kept[q] = torch.arange(S) == kept[row[q].item()]
    longest = (col[None, :] == 1) & observed[None, :]  # every query: observed entries of column 1
    skip_mask = (col[:, None] == col[None, :]) & observed[None, :] & ~torch.eye(S, dtype=torch.bool)
    maps = torch.stack([normalised(to_kept), normalised(longest.expand(S, S)), normalised(skip_mask)])
    table = classify_heads(map_scores(maps[None], mask), score_baselines(mask))
    assert list(table.families) == [{"masked-row"}, {"longest-contiguous-column", "mask-ignore"},
                                    {"column", "mask-ignore"}]
    assert table.loc[0, "masked_row"] == pytest.approx(1.0) and table.loc[1, "longest_column"] == pytest.approx(1.0)
    assert table.ignores_mask.tolist() == [False, True, True]


def test_longest_contiguous_column_of_hand_made_masks():
    mask = torch.tensor([[1, 0, 1],
                         [1, 1, 1],
                         [0, 1, 1],
                         [1, 1, 0],
                         [1, 1, 1]], dtype=torch.bool)
    assert longest_runs(mask[None]).tolist() == [[2, 4, 3]]
    assert longest_column(mask[None]).tolist() == [1]
    tie = torch.tensor([[1, 1], [0, 0], [1, 1]], dtype=torch.bool)
    assert longest_column(tie[None]).tolist() == [0]  # ties go to the first column
    assert longest_column(fig5_mask(7, 7)[None]).tolist() == [1]  # the paper's mask (b)
    assert longest_column(fig5_mask(7, 7, swapped=True)[None]).tolist() == [5]
    assert fig5_mask(7, 7).logical_not().nonzero().tolist() == [[3, c] for c in (0, 2, 3, 4, 5, 6)] + [
        [6, c] for c in (0, 1, 2, 3, 4, 6)]


def test_bad_shapes_and_thresholds_are_named():
    with pytest.raises(ValueError, match="n_cols must be >= 4"):
        fig5_mask(7, 3)
    with pytest.raises(ValueError, match="n_rows must be >= 3"):
        fig5_mask(2, 7)
    with pytest.raises(ValueError, match=r"m·n = S = 20"):
        map_scores(synthetic_maps(2), torch.ones(2, 3, 3, dtype=torch.bool))
    scores = map_scores(synthetic_maps(2), torch.ones(M, N_COLS, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"mass must be a finite number in \(0, 1\]"):
        classify_heads(scores, score_baselines(torch.ones(M, N_COLS)), mass=0)
    with pytest.raises(ValueError, match="missing"):
        classify_heads(scores.drop(columns="self"), score_baselines(torch.ones(M, N_COLS)))
    with pytest.raises(ValueError, match="identity_enrichment must be a finite number >= 1"):
        classify_heads(scores, score_baselines(torch.ones(M, N_COLS)), identity_enrichment=0.5)


@pytest.fixture
def model():
    return build_model(ModelConfig(hidden=32, layers=2, heads=4), seed=0).eval()


def test_model_scores_maps_and_group_ablation(model):
    batch = sample_batch(DataConfig(n_rows=M, n_cols=N_COLS, rank=1), 8, torch.Generator().manual_seed(0))
    assert mean_maps(model, batch).shape == (2, 4, S, S)
    scores = head_scores(model, batch)
    assert scores.index.names == ["layer", "head"] and scores.shape == (8, len(SCORES))
    table = classify_heads(scores, score_baselines(batch.observed))
    assert sum(len(h) for h in heads_by_family(table).values()) >= 8  # a head of two families is in both
    groups = group_ablation(model, batch, {"none": [], "one": [(1, 2)]})
    assert isinstance(groups, pd.DataFrame) and groups.loc["none", "heads"] == 0
    assert (groups.loc["none", ["L ratio", "L_obs ratio", "L_mask ratio"]] == 1).all()
    assert groups.loc["none", "L_mask"] == pytest.approx(losses(model, batch)["L_mask"], rel=1e-5)
    assert groups.loc["one", "L ablated"] != groups.loc["one", "L"]


def test_classify_model_is_classify_heads_of_the_model_scores(model):
    from matcomp.analysis.heads import classify_model

    batch = sample_batch(DataConfig(n_rows=M, n_cols=N_COLS, rank=1), 8, torch.Generator().manual_seed(0))
    direct = classify_heads(head_scores(model, batch), score_baselines(batch.observed), mass=0.3, enrichment=1.5)
    pd.testing.assert_frame_equal(classify_model(model, batch, mass=0.3, enrichment=1.5), direct)


def test_with_baselines_adds_the_uniform_row_under_the_heads():
    from matcomp.analysis.heads import with_baselines

    observed = random_mask(32, M, N_COLS, 0.3, torch.Generator().manual_seed(0))
    table = classify_heads(map_scores(synthetic_maps(32), observed), score_baselines(observed))
    shown = with_baselines(table, observed, ["families", "row", "self"])
    assert list(shown.columns) == ["families", "row", "self"] and len(shown) == 5
    assert list(shown["families"]) == ["row", "column", "identity", "other", ""]  # as text; the uniform row empty
    assert shown["row"].iloc[-1] == pytest.approx((N_COLS - 1) / S) and shown["self"].iloc[-1] == pytest.approx(1 / S)


def test_strongest_takes_the_best_head_per_step_and_score():
    from matcomp.analysis.heads import strongest

    scores = pd.DataFrame({"step": [0, 0, 0, 10, 10, 10], "layer": 0, "head": [0, 1, 0, 0, 1, 0],
                           "score": ["row", "row", "mask", "row", "row", "mask"],
                           "value": [0.2, 0.3, 0.9, 0.7, 0.1, 0.9]})
    best = strongest(scores, ["row"])
    assert list(best.columns) == ["row"] and best["row"].tolist() == [0.3, 0.7] and list(best.index) == [0, 10]


def test_a_head_that_is_both_row_and_masked_row_gets_both_labels():
    mask = fig5_mask(M, N_COLS)  # rows 2 and 3 missing, keeping columns 1 and 3
    observed, row = mask.flatten(), torch.arange(S) // N_COLS
    kept = {2: 2 * N_COLS + 1, 3: 3 * N_COLS + 3}
    pattern = (row[:, None] == row[None, :]) & ~torch.eye(S, dtype=torch.bool)  # its own row, itself excluded...
    for q in range(S):
        if row[q].item() in kept and not observed[q]:  # ...but the kept entry at a masked row's MASK query
            pattern[q] = torch.arange(S) == kept[row[q].item()]
    table = classify_heads(map_scores(normalised(pattern)[None, None], mask), score_baselines(mask))
    assert table.families[0] == {"row", "masked-row", "mask-ignore"}  # on this mask its row keys are mostly observed
    assert table.loc[0, "row"] == pytest.approx(1.0) and table.loc[0, "masked_row"] == pytest.approx(1.0)
    groups = heads_by_family(table.set_index(pd.MultiIndex.from_tuples([(1, 0)])))
    assert groups == {"row": [(1, 0)], "masked-row": [(1, 0)], "mask-ignore": [(1, 0)]}


def test_an_observed_copy_head_is_identity_and_a_weak_one_a_near_miss():
    observed = random_mask(64, M, N_COLS, 0.3, torch.Generator().manual_seed(2))
    flat = observed.reshape(64, 1, S, 1)
    eye, uniform = torch.eye(S), torch.full((S, S), 1 / S)
    copy = torch.where(flat, eye, uniform)  # itself where observed, uniform at MASK queries (the paper's (4,3))
    weak = torch.where(flat, 0.24 * eye + 0.76 * uniform, uniform)  # self 0.278 = 5.6 x uniform at observed
    faint = torch.where(flat, 0.17 * eye + 0.83 * uniform, uniform)  # 4.3 x uniform: 0.86 of the threshold
    scores = map_scores(torch.cat([copy, weak, faint], 1), observed)
    table = classify_heads(scores, score_baselines(observed))
    assert scores.loc[0, "self_observed"] == pytest.approx(1.0) and scores.loc[0, "self"] < 0.8
    assert list(table.families) == [{"identity"}, {"identity"}, set()]
    assert table.near_misses[2] == f"identity {scores.loc[2, 'self_observed']:.2f}"
    strict = classify_heads(scores, score_baselines(observed), identity_enrichment=8)
    assert list(strict.families) == [{"identity"}, set(), set()]


def test_family_text_shows_a_set_in_the_order_of_the_families_and_none_as_other():
    assert family_text(frozenset({"mask-ignore", "row", "identity"})) == "identity, row, mask-ignore"
    assert family_text(frozenset()) == "other"


def test_family_counts_count_a_head_in_each_of_its_families():
    tables = {0: pd.DataFrame({"families": [frozenset({"row", "masked-row"}), frozenset({"column"}), frozenset()]}),
              1: pd.DataFrame({"families": [frozenset({"row"}), frozenset({"row"}), frozenset({"identity"})]})}
    counts = family_counts(tables)
    assert counts.loc["row"].tolist() == [1, 2] and counts.loc["masked-row"].tolist() == [1, 0]
    assert counts.loc["other"].tolist() == [1, 0] and counts.sum().tolist() == [4, 3]


def test_longest_column_margin_reports_runs_and_overlap_with_masked_rows():
    small = longest_column_margin(fig5_mask(4, 4))  # the 4x4 mask: rows 2 and 3 missing, keeping columns 1 and 2
    assert small == {"column": 1, "run": 3, "next run": 2, "shared with masked rows": [(2, 1)]}
    paper = longest_column_margin(fig5_mask(7, 7))
    assert paper == {"column": 1, "run": 6, "next run": 3, "shared with masked rows": [(3, 1)]}


@pytest.mark.parametrize("size", [(5, 5), (6, 6), (7, 7), (5, 8), (9, 6)])
def test_the_separating_mask_keeps_its_longest_column_apart_from_the_masked_rows(size):
    """On ``separating_mask`` the longest column stands out and holds no masked row's kept entry, and a
    head that attends to it is a longest-contiguous-column head and not a masked-row head (on fig5_mask
    the two coincide)."""
    m, n = size
    mask = separating_mask(m, n)
    margin = longest_column_margin(mask)
    assert margin["shared with masked rows"] == [] and margin["run"] > margin["next run"]
    assert [i for i in range(m) if int(mask[i].sum()) == 1] == [0, m - 1]  # exactly the two masked rows
    S, observed = m * n, mask.flatten()
    col = torch.arange(S) % n
    longest = normalised(((col[None, :] == margin["column"]) & observed[None, :]).expand(S, S))
    table = classify_heads(map_scores(longest[None, None], mask), score_baselines(mask))
    assert table.loc[0, "longest_column"] == pytest.approx(1.0) and table.loc[0, "masked_row"] == 0
    assert "longest-contiguous-column" in table.families[0] and "masked-row" not in table.families[0]


def test_a_separating_mask_needs_five_rows_and_columns():
    with pytest.raises(ValueError, match="must be >= 5"):
        separating_mask(4, 7)


def test_matrix_masses_are_the_scores_before_their_mean_and_an_identical_batch_resamples_to_itself():
    observed = random_mask(16, M, N_COLS, 0.3, torch.Generator().manual_seed(1))
    maps = synthetic_maps(16)
    sums, counts = matrix_masses(maps, observed)
    assert sums.shape == (16, 4, len(SCORES)) and counts.shape == (16, len(SCORES))
    torch.testing.assert_close(sums.sum(0) / counts.sum(0), torch.tensor(map_scores(maps, observed).to_numpy()),
                               equal_nan=True)
    # one matrix repeated: every resample is the batch itself, so every draw counts the batch's heads
    same = observed[:1].expand(16, M, N_COLS)
    cache = {"probs.0": maps, "probs.1": maps.flip(1)}
    draws = resampled_counts(cache, same, 5, torch.Generator().manual_seed(0))
    whole = classify_heads(pd.concat([map_scores(cache[f"probs.{i}"], same) for i in (0, 1)], keys=[0, 1],
                                     names=["layer", "head"]), score_baselines(same))
    assert len(draws) == 5 and (draws == family_counts({"all": whole})["all"]).all().all()
    assert draws.loc[0, "row"] == 2 and draws.loc[0, "identity"] == 2  # a row and an identity head in each layer


def test_a_head_at_its_threshold_changes_family_between_resamples():
    """Half the matrices give a head a row score above the mass threshold and half below: its count moves
    with the matrices a resample draws, which is the spread a count's standard error reports."""
    observed = torch.ones(40, M, N_COLS, dtype=torch.bool)
    maps = synthetic_maps(40)[:, [0, 3]].clone()  # a row head and a uniform head
    maps[20:, 0] = normalised(torch.ones(S, S, dtype=torch.bool))  # the row head uniform on half the matrices
    draws = resampled_counts({"probs.0": maps}, observed, 200, torch.Generator().manual_seed(0),
                             mass=float(map_scores(maps, observed).loc[0, "row"]))
    assert 0.2 < (draws["row"] == 1).mean() < 0.8  # the threshold is its score over the whole batch


def test_each_resample_is_classified_against_its_own_masks_baselines(monkeypatch):
    """The observed share of the masks differs from matrix to matrix, so a resample's baselines (those of the
    "observed" and "mask" scores) are its own, not the whole batch's."""
    from matcomp.analysis import heads

    observed = random_mask(24, M, N_COLS, 0.3, torch.Generator().manual_seed(2))
    observed[:12] = True  # half the matrices fully observed
    seen = []
    real = heads.score_baselines
    monkeypatch.setattr(heads, "score_baselines", lambda masks: seen.append(real(masks)["observed"]) or real(masks))
    resampled_counts({"probs.0": synthetic_maps(24)}, observed, 20, torch.Generator().manual_seed(0))
    whole = real(observed)["observed"]
    assert len(seen) == 20 and len(set(seen)) > 5 and min(seen) < whole < max(seen)
