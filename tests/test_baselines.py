import math
from dataclasses import replace
from functools import partial

import pytest
import torch

from matcomp.analysis.baselines import (
    complete_all,
    completion_metrics,
    lambda_table,
    paired_se,
    pooled_with_se,
    regularised_objective,
)
from matcomp.analysis.solvers import (
    als_complete,
    nuclear_norm_min,
    nuclear_norm_regularised,
    soft_impute,
)
from matcomp.config import DataConfig, ModelConfig
from matcomp.data import make_batch, sample_batch
from matcomp.models.bert import MatrixBert
from matcomp.seeding import analysis_generator

PAPER_DATA = DataConfig(n_rows=7, n_cols=7, rank=2, p_mask=0.3)


def exact_low_rank(seed: int, p_mask: float = 0.1, batch: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """Unrounded 7×7 rank-2 matrices X = U Vᵀ (float64) and their masks."""
    b = sample_batch(DataConfig(n_rows=7, n_cols=7, rank=2, p_mask=p_mask), batch, torch.Generator().manual_seed(seed))
    return (b.U @ b.V.mT).double(), b.observed


def rounded(seed: int, batch: int = 8):
    return sample_batch(PAPER_DATA, batch, torch.Generator().manual_seed(seed))


# Nuclear-norm minimisation is not exact on every small matrix: with uniform factors about 1 in 5 7×7
# rank-2 matrices at p_mask 0.1 are not recovered (seed 0 holds two of 8). All 8 of seed 1 are.
@pytest.mark.parametrize("method, tolerance", [
    (nuclear_norm_min, 1e-6),
    (lambda X, obs: soft_impute(X, obs, lam=1e-5), 1e-3),  # bias of the threshold λ|Ω|/2 ≈ 2e-4
    (lambda X, obs: als_complete(X, obs, rank=2, lam=1e-8), 1e-5),
], ids=["nuclear_norm_min", "soft_impute", "als_complete"])
def test_every_method_recovers_exact_low_rank_matrices(method, tolerance):
    X, observed = exact_low_rank(seed=1)
    completed = method(X, observed)
    assert completed.dtype == torch.float64 and completed.shape == X.shape
    assert (completed - X).abs().max() < tolerance


def test_als_knowing_the_rank_recovers_a_matrix_nuclear_norm_cannot():
    X, observed = exact_low_rank(seed=0)
    nn_error = (nuclear_norm_min(X, observed) - X).abs().amax((1, 2))  # (B,)
    als_error = (als_complete(X, observed, rank=2, lam=1e-8) - X).abs().amax((1, 2))
    assert nn_error.max() > 0.1
    assert als_error.max() < 1e-5


def test_regularised_approaches_constrained_as_lam_shrinks():
    batch = rounded(seed=0)
    constrained = nuclear_norm_min(batch)
    gaps = [(nuclear_norm_regularised(batch, lam=lam) - constrained).abs().max().item()
            for lam in (1e-3, 1e-5, 1e-6)]
    assert gaps[0] > gaps[1] > gaps[2]
    assert gaps[2] < 2e-3


def test_soft_impute_solves_the_regularised_problem():
    batch = rounded(seed=0)
    by_cvxpy, by_soft_impute = nuclear_norm_regularised(batch, lam=1e-3), soft_impute(batch, lam=1e-3)
    # soft-impute gets as low as the interior-point solver (lower by ~1e-11, in fact); the completions
    # agree to 7e-5, the interior point's accuracy along nearly flat directions of the objective
    objective = partial(regularised_objective, values=batch.values, observed=batch.observed, lam=1e-3)
    gap = objective(by_soft_impute) - objective(by_cvxpy)
    assert gap.max() < 1e-9
    assert (by_soft_impute - by_cvxpy).abs().max() < 2e-4
    # the fit at observed entries costs about λ: L_obs ≈ 3.6e-5 at λ = 1e-3 in the paper's table
    l_obs = completion_metrics({"cvxpy": by_cvxpy}, batch).loc["cvxpy", "L_obs"]
    assert 1e-5 < l_obs < 1e-4


def test_metrics_are_pooled_and_the_nuclear_norm_averaged():
    values = torch.tensor([[[3.0, 0.0], [0.0, 4.0]], [[1.0, 0.0], [0.0, 0.0]]])  # nuclear norms 7 and 1
    observed = torch.tensor([[[True, True], [True, False]], [[True, True], [True, True]]])
    table = completion_metrics({"truth": values, "zeros": torch.zeros_like(values)}, values, observed)
    assert table.loc["truth"].tolist() == [0.0, 0.0, 0.0, 4.0]
    # squared errors 9 and 16 (missing) in matrix 0, 1 in matrix 1, pooled over 8 entries / 7 observed
    assert table.loc["zeros", "L"] == pytest.approx(26 / 8)
    assert table.loc["zeros", "L_obs"] == pytest.approx(10 / 7)
    assert table.loc["zeros", "L_mask"] == pytest.approx(16.0)
    assert table.loc["zeros", "nuclear_norm"] == 0.0


def test_a_batch_and_its_tensors_give_the_same_completion():
    batch = make_batch(torch.tensor([[[1.0, 2.0], [2.0, 4.0]]]), torch.tensor([[[True, True], [True, False]]]))
    assert torch.equal(soft_impute(batch, lam=1e-3), soft_impute(batch.values, batch.observed, lam=1e-3))


def _values_with(entry: float) -> torch.Tensor:
    values = torch.ones(2, 3, 3)
    values[1, 0, 2] = entry
    return values


OBSERVED = torch.ones(2, 3, 3, dtype=torch.bool)
NOBODY = OBSERVED.clone()
NOBODY[1] = False


@pytest.mark.parametrize("call, message", [
    (lambda: nuclear_norm_min(torch.ones(2, 3, 3), NOBODY), "matrix 1 has no observed entry"),
    (lambda: soft_impute(_values_with(math.nan), OBSERVED, lam=1e-3), "matrix 1 has NaN or inf"),
    (lambda: als_complete(_values_with(math.inf), OBSERVED, rank=1, lam=1e-3), "matrix 1 has NaN or inf"),
    (lambda: nuclear_norm_min(torch.ones(2, 3, 3), OBSERVED[:, :2]), r"observed has shape \(2, 2, 3\)"),
    (lambda: soft_impute(torch.ones(3, 3), OBSERVED[0], lam=1e-3), r"values must have shape \(B, m, n\)"),
    (lambda: soft_impute(torch.ones(2, 3, 3), OBSERVED.float(), lam=1e-3), "observed must be a bool tensor"),
    (lambda: soft_impute(torch.ones(2, 3, 3), lam=1e-3), "observed .* is required"),
    (lambda: soft_impute(rounded(0, batch=1), OBSERVED, lam=1e-3), "observed must not be given with a Batch"),
    (lambda: nuclear_norm_regularised(torch.ones(2, 3, 3), OBSERVED, lam=0.0), "lam must be a finite number > 0"),
    (lambda: soft_impute(torch.ones(2, 3, 3), OBSERVED, lam=-1e-3), "lam must be a finite number > 0"),
    (lambda: als_complete(torch.ones(2, 3, 3), OBSERVED, rank=2, lam=math.nan), "lam must be"),
    (lambda: als_complete(torch.ones(2, 3, 3), OBSERVED, rank=0, lam=1e-3), r"rank must be .* \[1, 3\]; got 0"),
    (lambda: als_complete(torch.ones(2, 3, 4), OBSERVED.new_ones(2, 3, 4), rank=4, lam=1e-3), "rank must be"),
    (lambda: soft_impute(torch.ones(2, 3, 3), OBSERVED, lam=1e-3, max_iter=0), "max_iter must be an integer > 0"),
    (lambda: completion_metrics({"flat": torch.zeros(2, 9)}, torch.ones(2, 3, 3), OBSERVED),
     "completion 'flat' has shape"),
])
def test_bad_input_raises_a_value_error_naming_the_problem(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_regularised_objective_adds_the_mean_observed_error_and_lambda_times_the_nuclear_norm():
    values = torch.tensor([[[3.0, 0.0], [0.0, 4.0]]])
    observed = torch.tensor([[[True, True], [True, False]]])
    # zeros: squared errors 9, 0, 0 on the 3 observed entries, nuclear norm 0; the truth: no error, norm 7
    assert regularised_objective(torch.zeros_like(values), values, observed, 0.5).tolist() == [3.0]
    assert regularised_objective(values, values, observed, 0.5).tolist() == [3.5]


def test_pooled_with_se_is_the_pooled_mean_with_its_ratio_standard_error():
    values = torch.zeros(2, 2, 2)
    completed = torch.tensor([[[1.0, 1.0], [1.0, 2.0]], [[2.0, 0.0], [0.0, 0.0]]])  # squared errors 1,1,1,4 / 4,0,0,0
    observed = torch.tensor([[[True, True], [True, False]], [[True, False], [False, False]]])
    got = pooled_with_se(completed, values, observed)
    # observed: sums s = (3, 4) over counts c = (3, 1): L = 7/4; se = sqrt(2 Σ (s − L c)²) / Σ c
    assert got["L_obs"] == pytest.approx(7 / 4)
    assert got["L_obs se"] == pytest.approx(math.sqrt(2 * ((3 - 21 / 4) ** 2 + (4 - 7 / 4) ** 2)) / 4)
    assert got["L_mask"] == pytest.approx(4 / 4)  # (4 + 0) over 1 + 3 missing entries
    assert got["L_mask se"] == pytest.approx(math.sqrt(2 * ((4 - 1) ** 2 + (0 - 3) ** 2)) / 4)
    assert got["L"] == pytest.approx(11 / 8)
    assert got["L se"] == pytest.approx(math.sqrt(2 * ((7 - 11 / 2) ** 2 + (4 - 11 / 2) ** 2)) / 8)


def test_paired_se_is_zero_for_identical_completions_and_the_spread_of_differences_otherwise():
    values = torch.zeros(3, 1, 2)
    a = torch.tensor([[[1.0, 1.0]], [[2.0, 0.0]], [[0.0, 0.0]]])  # per-matrix MSE 1, 2, 0
    assert paired_se(a, a, values) == 0.0
    assert paired_se(a, torch.zeros_like(a), values) == pytest.approx(1.0 / math.sqrt(3))  # std of (1, 2, 0) is 1


def test_complete_all_drops_matrices_with_nothing_observed_and_runs_every_method():
    batch = rounded(seed=0, batch=3)
    observed = batch.observed.clone()
    observed[1] = False
    batch = make_batch(batch.values, observed)
    model = MatrixBert(ModelConfig(hidden=16, layers=1, heads=2)).eval()
    values, kept, done, dropped = complete_all(batch, lam=1e-3, rank=2, model=model)
    assert dropped == 1 and values.shape == (2, 7, 7) and kept.flatten(1).any(1).all()
    assert list(done) == ["BERT", "nuclear norm min", "regularised, λ=0.001", "soft-impute, λ=0.001",
                          "rank-2 ALS (oracle)"]
    assert all(c.shape == (2, 7, 7) and c.dtype == torch.float64 for c in done.values())
    assert torch.equal(done["nuclear norm min"], nuclear_norm_min(values, kept))
    assert "BERT" not in complete_all(batch, lam=1e-3, rank=2)[2]


def test_lambda_table_has_a_row_per_lambda_and_l_obs_grows_with_lambda():
    batch = rounded(seed=0, batch=6)
    model = MatrixBert(ModelConfig(hidden=16, layers=1, heads=2)).eval()
    table = lambda_table(batch, [1e-3, 1e-2, 1e-1], model=model, label="BERT (step 0)")
    assert list(table.index) == ["BERT (step 0)", "λ = 0.001", "λ = 0.01", "λ = 0.1"]
    assert list(table.columns) == ["L_obs", "L_obs se", "L_mask", "L_mask se", "L", "L se"]
    l_obs = table["L_obs"].iloc[1:]
    assert l_obs.is_monotonic_increasing and l_obs.iloc[0] < 1e-4 < l_obs.iloc[-1]
    assert (table.filter(like=" se") > 0).all().all()


def test_convex_solvers_give_the_same_answer_in_two_processes():
    batch = sample_batch(DataConfig(n_rows=4, n_cols=4, rank=1), 6, torch.Generator().manual_seed(3))
    one = nuclear_norm_min(batch)
    two = nuclear_norm_min(batch, workers=2)
    assert torch.allclose(one, two, atol=1e-6)
    regularised = [nuclear_norm_regularised(batch, lam=1e-3, workers=w) for w in (1, 2)]
    assert torch.allclose(*regularised, atol=1e-6)
    with pytest.raises(ValueError, match="workers must be an integer > 0"):
        nuclear_norm_min(batch, workers=0)


def test_completion_sweep_scores_every_method_at_every_p_mask_on_the_same_matrices():
    from matcomp.analysis.baselines import (
        NN,
        TRUTH,
        completion_sweep,
        headline_table,
        solver_agreement,
        versus_table,
    )

    data = DataConfig(n_rows=3, n_cols=3, rank=1, p_mask=0.3)
    model = MatrixBert(ModelConfig(hidden=16, layers=1, heads=2)).eval()
    tables = completion_sweep(data, [0.2, 0.4], samples=6, lam=1e-3, model=model)
    sweep, by_p_mask = tables["sweep"], tables["by_p_mask"]
    methods = ["BERT", NN, "regularised, λ=0.001", "soft-impute, λ=0.001", "rank-1 ALS (oracle)", TRUTH]
    assert list(sweep["method"].unique()) == methods and sweep["p_mask"].unique().tolist() == [0.2, 0.4]
    assert list(by_p_mask.index) == [0.2, 0.4] and (by_p_mask["dropped"] >= 0).all()
    truth = sweep[(sweep.method == TRUTH)]
    assert (truth["L"] == 0).all() and (sweep[sweep.method == NN]["L_obs"] < 1e-6).all()
    assert (sweep[sweep.method == "BERT"]["± s.e. of L − L_BERT"] == 0).all()

    # the stored s.e. and agreement are those of the completions themselves
    batch = sample_batch(replace(data, p_mask=0.4), 6, analysis_generator(0))
    values, observed, done, dropped = complete_all(batch, 1e-3, 1, model=model)
    assert by_p_mask.loc[0.4, "dropped"] == dropped
    at = sweep[sweep.p_mask == 0.4].set_index("method")
    assert at.loc[NN, "± s.e. of L − L_BERT"] == paired_se(done[NN], done["BERT"], values)
    agree = solver_agreement(done["regularised, λ=0.001"], done["soft-impute, λ=0.001"], values, observed, 1e-3)
    assert by_p_mask.loc[0.4, list(agree)].to_dict() == agree

    headline = headline_table(sweep, 0.2)
    assert list(headline.index) == methods
    assert headline.loc[NN, "L / BERT's"] == pytest.approx(headline.loc[NN, "L"] / headline.loc["BERT", "L"])
    assert math.isnan(headline.loc["BERT", "L / BERT's"]) and math.isnan(headline.loc[TRUTH, "± s.e. of L − L_BERT"])
    assert headline.loc[TRUTH, "norm / BERT's"] > 0

    versus = versus_table(sweep)
    assert list(versus.index) == [0.2, 0.4]
    gap = versus.loc[0.4, f"L, {NN}"] - versus.loc[0.4, "L, BERT"]
    assert versus.loc[0.4, "L gap (NN − BERT)"] == pytest.approx(gap)
    assert versus.loc[0.4, "± s.e."] == at.loc[NN, "± s.e. of L − L_BERT"]


def test_solver_agreement_compares_two_solutions():
    from matcomp.analysis.baselines import solver_agreement

    values, observed = exact_low_rank(0, p_mask=0.3, batch=4)
    convex = nuclear_norm_regularised(values, observed, lam=1e-3)
    same = solver_agreement(convex, convex, values, observed, lam=1e-3)
    assert same["gap max"] == same["gap mean"] == same["entry"] == same["L change"] == 0
    assert same["objective"] == pytest.approx(regularised_objective(convex, values, observed, 1e-3).mean().item())
    shifted = solver_agreement(convex, convex + 0.1, values, observed, lam=1e-3)
    assert shifted["entry"] == pytest.approx(0.1) and shifted["gap max"] > 0 and shifted["L change"] > 0


def test_lambda_draws_are_one_lambda_table_per_seed():
    from matcomp.analysis.baselines import lambda_draws
    from matcomp.seeding import analysis_generator

    data = DataConfig(n_rows=3, n_cols=3, rank=1, p_mask=0.3)
    draws = lambda_draws(data, 1e-3, samples=5, seeds=[2, 3])
    assert list(draws.index) == [2, 3] and {"L", "L se", "L_mask"} <= set(draws.columns)
    one = lambda_table(sample_batch(data, 5, analysis_generator(3)), [1e-3])
    assert draws.loc[3, "L"] == pytest.approx(one["L"].iloc[0]) and draws.loc[2, "L"] != draws.loc[3, "L"]


def test_stored_lambda_tables_are_the_computed_ones(store):
    import pandas as pd

    from matcomp.analysis.baselines import lambda_draws, stored_lambda_draws, stored_lambda_table

    data = DataConfig(n_rows=3, n_cols=3, rank=1)
    model = MatrixBert(ModelConfig(hidden=16, layers=1, heads=2)).eval()
    direct = lambda_table(sample_batch(data, 4, analysis_generator(0)), [1e-3, 1e-2])
    for _ in range(2):  # computed and stored, then read back
        pd.testing.assert_frame_equal(stored_lambda_table(data, [1e-3, 1e-2], 4, seed=0), direct, check_exact=True)
    pd.testing.assert_frame_equal(stored_lambda_draws(data, 1e-3, 4, [0, 1]), lambda_draws(data, 1e-3, 4, [0, 1]),
                                  check_exact=True)
    assert "BERT" in lambda_table(sample_batch(data, 4, analysis_generator(0)), [1e-3], model=model).index
    with pytest.raises(ValueError, match="run and step are given together"):
        stored_lambda_table(data, [1e-3], 4, step=10)
