"""What the nuclear_norm and ood chapters say about their tables (``matcomp.book.chapters.nuclear_norm``
and ``matcomp.book.chapters.ood``)."""

import pandas as pd
import pytest

from matcomp.analysis.baselines import NN, TRUTH
from matcomp.book.chapters.nuclear_norm import (
    agreement_values,
    als_values,
    lambda_values,
    matched_norms,
    norm_values,
)
from matcomp.book.chapters.ood import axis_table, distribution_values, rank_note, rows_values, twin_table

ALS = "rank-1 ALS (oracle)"


def sweep(bert_L, nn_L, bert_norm=(2.0, 2.1, 2.2), nn_norm=(1.9, 1.8, 1.7), als_L=(1e-4, 2e-4, 4e-4)):
    rows = []
    for i, p in enumerate([0.1, 0.3, 0.5]):
        rows += [{"method": "BERT", "p_mask": p, "L": bert_L[i], "nuclear_norm": bert_norm[i]},
                 {"method": NN, "p_mask": p, "L": nn_L[i], "nuclear_norm": nn_norm[i]},
                 {"method": ALS, "p_mask": p, "L": als_L[i], "nuclear_norm": 2.0},
                 {"method": TRUTH, "p_mask": p, "L": 0.0, "nuclear_norm": 2.0}]
    return pd.DataFrame(rows)


def test_matched_norms_interpolate_where_the_losses_overlap_and_are_empty_where_they_do_not():
    overlapping = sweep(bert_L=[0.002, 0.004, 0.02], nn_L=[0.001, 0.004, 0.016])
    matched = matched_norms(overlapping)
    assert list(matched.index) == [0.1, 0.3]  # 0.02 is above every L of nuclear-norm minimisation
    assert matched.loc[0.3, f"norm, {NN}"] == pytest.approx(1.8)  # an exact sweep point
    # L 0.002 is halfway (in log L) between 0.001 and 0.004: norm and p_mask halfway too
    assert matched.loc[0.1, f"norm, {NN}"] == pytest.approx(1.85)
    assert matched.loc[0.1, f"p_mask, {NN}"] == pytest.approx(0.2)
    assert matched.loc[0.1, "norm ratio"] == pytest.approx(2.0 / 1.85)
    values = norm_values(overlapping, matched)
    assert (values["nn_norm_larger"], values["nn_norm_n"], values["nn_norm_worse"]) == ("3", "3", "2")
    assert values["nn_norm_matched"].data.startswith("At matched MSE (the BERT at p_mask 0.1, 0.3,")
    assert "the BERT's norm is larger: 1.081–1.167 times" in values["nn_norm_matched"].data
    assert (values["nn_norm_bert_truth"], values["nn_norm_nn_truth"]) == ("2", "0")

    apart = sweep(bert_L=[0.05, 0.06, 0.07], nn_L=[0.001, 0.002, 0.004])
    assert matched_norms(apart).empty
    assert "do not overlap" in norm_values(apart, matched_norms(apart))["nn_norm_matched"].data


def test_agreement_is_said_at_the_precision_of_the_difference():
    row = pd.Series({"gap max": 1e-12, "gap mean": -4e-10, "objective": 2e-3, "entry": 0.02, "L change": 2.5e-5})
    values = agreement_values(row, 0.3, 1e-3)
    assert (values["nn_agree_gap"], values["nn_agree_L"], values["nn_agree_entry"]) == ("4.0e-10", "+2.5e-05", "0.02")


def test_als_values_name_the_range_and_where_the_oracle_leads_most():
    table = sweep(bert_L=[0.01, 0.02, 0.04], nn_L=[0.001, 0.004, 0.016])
    # best other method: 0.001, 0.004, 0.016 against ALS 1e-4, 2e-4, 4e-4: 10x, 20x, 40x
    assert als_values(table) == {"nn_als_span": "10.0–40.0", "nn_als_most": "0.5", "nn_als_least": "0.1"}


def test_lambda_values_compare_with_the_paper_and_place_the_draw():
    ours = pd.DataFrame({"L_obs": [1.0, 1.0], "L_obs se": [0.01, 0.01], "L_mask": [2.0, 4.0],
                         "L_mask se": [0.2, 0.2], "L": [1.5, 3.0], "L se": [0.15, 0.15]},
                        index=["λ = 0.001", "λ = 0.005"])
    theirs = pd.DataFrame({"L_obs": [1.0, 1.0], "L_mask": [2.5, 4.0], "L": [1.5, 2.0]}, index=ours.index)
    draws = pd.DataFrame({"L": [1.5, 1.2, 1.8]}, index=pd.Index([0, 1, 2], name="seed"))
    values = lambda_values(ours, theirs, draws, 0.001, seed=0, paper_L=1.5)
    assert "L_mask -20% to +0%" in values["nn_lam_vs_paper"] and "L +0% to +50%" in values["nn_lam_vs_paper"]
    assert "L_obs +0% (s.e." in values["nn_lam_vs_paper"]  # a range whose ends print alike is printed once
    shape = values["nn_lam_within"], values["nn_lam_worst"], values["nn_lam_worst_at"]
    assert shape == ("λ = 0.001", "2.0", "λ = 0.005")
    assert "has the 2nd lowest L of 3 draws" in values["nn_lam_draw"] and values["nn_lam_mean"] == "+0%"
    assert lambda_values(ours, theirs, draws, 0.001, seed=7, paper_L=1.5)["nn_lam_draw"] == ""  # not among them


def test_the_axis_table_and_the_rows_values_name_the_misses():
    relative = pd.DataFrame({"BERT": [0.42, 0.71, 0.25, 0.60, 0.80], NN: [0.59, 0.39, 0.24, 0.20, 0.15]},
                            index=[2, 3, 4, 5, 6])
    row = axis_table({"rows": relative, "columns": relative.assign(BERT=1.5)}, {"rows": 4, "columns": 4}).loc["rows"]
    assert row["misses (BERT against nuclear-norm min.)"].startswith("3 (0.71 against 0.39); 5 (0.60")
    assert row["worst (BERT / nuclear-norm min.)"] == "6 (5.3×)" and row["ahead at"] == "2"
    assert row["worse than answering 0 at"] == "none"
    values = rows_values(relative, 4)
    assert values["ood_rows_misses"] == "3 of 4" and values["ood_rows_worst"] == "6 rows, 0.80 against 0.15"
    assert values["ood_rows_close"] == "0 of 4"  # 0.42 against 0.59 is not close either
    assert values["ood_rows_verdict"] == "does not: as the paper on 0 of 1 seed"
    tracking = rows_values(relative.assign(BERT=relative[NN]), 4)
    assert tracking["ood_rows_misses"] == "0 of 4" and tracking["ood_rows_worst"] == "none"
    assert tracking["ood_rows_verdict"].startswith("consistent with")  # one model: never "reproduces"


def test_distribution_findings_read_both_scales():
    table = pd.DataFrame({"L_mask": [0.028, 0.0025, 0.0045], "L_mask / E[X²]": [0.25, 0.39, 0.58]},
                         index=["trained", "gaussian", "laplace"])
    values = distribution_values(table)
    assert (values["ood_dist_rel"], values["ood_dist_rel_others"]) == ("0.25", "0.39 on gaussian, 0.58 on laplace")
    assert values["ood_dist_rel_way"] == "above the trained distribution's on gaussian, laplace"
    assert values["ood_dist_abs_way"] == "above the trained distribution's on none and below it on gaussian, laplace"


def test_the_twin_table_pairs_each_gaussian_run_with_its_uniform_twin():
    index = pd.MultiIndex.from_tuples([("uniform factors", 0), ("Gaussian factors", 0), ("uniform factors", 1),
                                       ("Gaussian factors", 1)], names=["factors", "seed"])
    table = pd.DataFrame({"drop step": pd.array([5060, 11866, 6468, None], dtype="Int64")}, index=index)
    twins = twin_table(table)
    assert twins.loc[0].tolist() == [5060, 11866, 6806]
    assert twins.loc[1, "uniform drop"] == 6468
    assert twins.loc[1, ["Gaussian drop", "Gaussian − uniform (steps)"]].isna().all()


def test_rank_note_counts_degrees_of_freedom_only_when_extrapolating():
    note = rank_note(True, 2, 1, 4, 4, 0.3)
    assert "12 degrees of freedom and about 11 of its 16 entries" in note and "rank-1 model" in note
    assert rank_note(False, 2, 2, 7, 7, 0.3) == ("The rank panel reads a model trained on rank 2, as the paper's "
                                                 "(NeurIPS Fig. 19).")
