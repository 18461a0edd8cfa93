"""The key numbers' readers (``matcomp.analysis.key_numbers``) on a tiny trained run: each number is the chapter's
own analysis, and where it is an estimate its standard error is the spread the book's noise rule reads."""

import math

import numpy as np
import pytest
import torch

from matcomp.analysis.embeddings import (
    arrangement_correlation,
    cluster_score,
    position_embeddings,
    position_groups,
    task_values,
    value_embeddings,
)
from matcomp.analysis.evaluation import copy_check
from matcomp.analysis.heads import NO_FAMILY, classify_model, family_counts, group_ablation
from matcomp.analysis.key_numbers import (
    _least_group_ablation,
    heads_id,
    jackknife,
    read_copying,
    read_embeddings,
    read_probing,
    read_taxonomy,
)
from matcomp.analysis.phases import Phases
from matcomp.analysis.probing import answer_zero_mse, probe_layers
from matcomp.data import sample_batch, second_moment
from matcomp.runs.store import get_or_train
from matcomp.seeding import analysis_generator


@pytest.fixture
def trained(micro, tmp_path):
    run = get_or_train(micro, progress=False, root=tmp_path)
    return run, Phases(dropped=False, plateau=(10,), pre=15, copy_steps=(10, 15, 20), post=40)


def test_the_masked_row_probe_ratio_is_the_probe_tables_with_a_paired_error_over_the_test_matrices(trained):
    run, phases = trained
    numbers = read_probing(run, phases, train_matrices=64, test_matrices=48)
    test = sample_batch(run.config.data, 48, analysis_generator(1))
    train = sample_batch(run.config.data, 64, analysis_generator(0))
    row = probe_layers(run.bert(phases.post), train, test, "row")["test MSE"].drop(0)
    ratio = numbers["row_probe_ratio"]
    assert ratio.value == pytest.approx(row.min() / answer_zero_mse(test, "row"), rel=1e-6)  # its float32 mean
    assert 0 < ratio.se < 0.2 * ratio.value  # 48 matrices: a few per cent, not nothing, not the whole


def test_the_copy_errors_are_the_worst_table_1_cell_of_the_pre_shift_model_over_e_x2(trained):
    run, phases = trained
    numbers = read_copying(run, phases, copy_samples=32, ablation_samples=32, eval_seed=0)
    table = copy_check(run.bert(phases.pre), run.config.data, 32)  # the pre-shift checkpoint, not the last
    for key, inputs in (("copy_error_low_rank", "rank-1"), ("copy_error_random", "random")):
        worst = table[table["inputs"] == inputs][["L'_mask", "L_obs"]].to_numpy().max()
        assert numbers[key].value == pytest.approx(worst / second_moment(run.config.data), rel=1e-9)
        assert math.isnan(numbers[key].se)  # a worst cell has no standard error here


def test_the_position_silhouettes_carry_a_jackknife_error_over_the_positions(trained):
    run, phases = trained
    d = run.config.data
    numbers = read_embeddings(run, phases, value_samples=64)
    points = position_embeddings(run.bert(phases.post), d.n_rows, d.n_cols)
    rows, cols = position_groups(d.n_rows, d.n_cols)
    assert numbers["column_silhouette"].value == pytest.approx(cluster_score(points, cols))
    assert numbers["column_minus_row"].value == pytest.approx(cluster_score(points, cols) - cluster_score(points, rows))
    leave_one_out = [cluster_score(np.delete(points.numpy(), i, 0), np.delete(cols, i)) for i in range(len(cols))]
    n = len(cols)
    assert numbers["column_silhouette"].se == pytest.approx(math.sqrt((n - 1) / n * np.var(leave_one_out) * n))
    assert numbers["column_silhouette_pre"].se > 0  # the pre-shift model's too


def test_the_value_tokens_arrangement_is_read_at_the_copy_tables_last_step_with_an_error_over_the_tokens(trained):
    run, phases = trained
    numbers = read_embeddings(run, phases, value_samples=64)
    values = task_values(run.config.data, 64)
    final, earlier = (value_embeddings(run.bert(step), values) for step in (phases.post, phases.copy_steps[-1]))
    aligned = numbers["tokens_arranged_before_drop"]
    assert aligned.value == pytest.approx(arrangement_correlation(final, earlier))
    assert aligned.value != pytest.approx(arrangement_correlation(final, value_embeddings(run.bert(phases.pre),
                                                                                          values)))
    assert 0 < aligned.se < 1


def test_head_counts_carry_a_bootstrap_error_and_no_family_leaves_no_family_ablation(trained):
    run, phases = trained
    thresholds = {"mass": 0.3, "enrichment": 1.5, "identity_enrichment": 2.0, "mask_ratio": 0.25, "near": 0.8}
    numbers = read_taxonomy(run, phases, samples=32, eval_seed=0, **thresholds)
    batch = sample_batch(run.config.data, 32, analysis_generator(0))
    counts = family_counts({"random": classify_model(run.bert(phases.post), batch, **thresholds)})["random"]
    for family in ("row", "column"):
        assert numbers[heads_id(family)].value == counts[family]
        assert numbers[heads_id(family)].se >= 0  # 0 where every resample classifies alike
    assert (counts.drop(NO_FAMILY) == 0).all() and math.isnan(numbers["least_group_ablation"].value)  # near-uniform


def test_the_least_family_ablation_is_the_smallest_l_mask_rise_of_app_ls_table_leaving_out_no_family(trained):
    run, phases = trained
    model = run.bert(phases.post)
    batch = sample_batch(run.config.data, 32, analysis_generator(0))
    table = classify_model(model, batch).assign(families=[frozenset({"row", "column"}), frozenset()])  # given by hand
    least = _least_group_ablation(model, batch, table)
    ablated = group_ablation(model, batch, {"row": [(0, 0)], "column": [(0, 0)], NO_FAMILY: [(0, 1)]})
    assert least.value == pytest.approx(ablated.loc["row", "L_mask ratio"], rel=1e-5)  # head (0, 1) left out
    assert least.value != pytest.approx(ablated.loc[NO_FAMILY, "L_mask ratio"], rel=1e-5)
    assert least.se > 0


def test_a_jackknife_of_well_separated_groups_is_tight_and_of_no_grouping_is_wide():
    generator = torch.Generator().manual_seed(0)
    centres = torch.tensor([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    groups = np.repeat(np.arange(3), 6)
    tight = centres[groups] + 0.1 * torch.randn(18, 2, generator=generator)
    loose = torch.randn(18, 2, generator=generator)
    clear = jackknife(lambda kept: cluster_score(tight[kept], groups[kept]), 18)
    none = jackknife(lambda kept: cluster_score(loose[kept], groups[kept]), 18)
    assert clear.value > 0.95 and clear.se < 0.01
    assert abs(none.value) < 0.2 and none.se > 10 * clear.se
