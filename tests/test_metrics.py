import math

import pytest
import torch

from matcomp.metrics import masked_mse


def test_pooled_not_per_matrix_average():
    target = torch.zeros(2, 2, 2)
    pred = torch.tensor([[[1.0, 0.0], [0.0, 0.0]], [[2.0, 2.0], [0.0, 0.0]]])
    observed = torch.tensor([[[False, True], [True, True]], [[False, False], [True, True]]])
    m = masked_mse(pred, target, observed)
    # missing entries: errors 1 (matrix 0), 4 and 4 (matrix 1) -> pooled 3, not mean(1, 4) = 2.5
    assert m["L_mask"].item() == 3.0
    assert m["L_obs"].item() == 0.0
    assert m["L"].item() == 9 / 8
    assert m["mask_value"].item() == pytest.approx(5 / 3)


def test_flat_predictions_are_reshaped_and_loss_has_a_gradient():
    target = torch.randn(4, 3, 3)
    pred = torch.zeros(4, 9, requires_grad=True)
    m = masked_mse(pred, target, torch.rand(4, 3, 3) > 0.3)
    m["L"].backward()
    assert torch.allclose(pred.grad.view(4, 3, 3), -2 * target / 36)


def test_pooled_loss_is_the_pooled_mean_over_the_chosen_entries_with_its_standard_error():
    from matcomp.metrics import pooled_loss, squared_errors

    target = torch.zeros(2, 1, 2)
    where = torch.tensor([[[True, False]], [[True, True]]])
    pred = target + torch.tensor([1.0, 2.0])  # squared errors 1, 4 in each matrix
    assert [t.tolist() for t in squared_errors(pred, target, where)] == [[1.0, 5.0], [1, 2]]
    assert pooled_loss(pred, target, where)[0] == 2.0  # (1 + 5) / 3, pooled: not mean(1, 2.5)
    assert pooled_loss(pred, target)[0] == 2.5  # every entry
    assert all(math.isnan(x) for x in pooled_loss(pred, target, torch.zeros_like(where)))  # nothing to pool
    with pytest.raises(ValueError, match="pooled_loss: where has shape"):
        pooled_loss(pred, target, where[:, :, :1].repeat(1, 2, 1))


def test_the_analyses_losses_are_those_they_wrote_by_hand_before_pooled_loss():
    """Each analysis that scored a completion with its own squared error now reads ``pooled_loss`` or
    ``squared_errors``: the same numbers, bit for bit where the sum runs in the same order (the baselines'), and
    to rounding where it does not (patching summed in float32 before, probing over one flat index)."""
    from matcomp.analysis.baselines import paired_se, pooled_with_se, regularised_objective, solver_agreement
    from matcomp.analysis.patching import patching_table
    from matcomp.data import Batch
    from matcomp.metrics import PAPER_ORDER, ratio_estimate

    gen = torch.Generator().manual_seed(0)
    values = torch.randn(16, 4, 5, generator=gen)
    observed = torch.rand(16, 4, 5, generator=gen) > 0.3
    a, b = (values.double() + 0.3 * torch.randn(16, 4, 5, generator=gen, dtype=torch.float64) for _ in range(2))
    err = (a - values.double()) ** 2
    before = {}
    for name, where in zip(PAPER_ORDER, [observed, ~observed, torch.ones_like(observed)]):
        before[name], before[name + " se"] = ratio_estimate((err * where).sum((1, 2)), where.sum((1, 2)))
    assert pooled_with_se(a, values, observed) == before
    per_matrix = err.mean((1, 2)) - ((b - values.double()) ** 2).mean((1, 2))
    assert paired_se(a, b, values) == per_matrix.std().item() / len(values) ** 0.5
    assert torch.equal(regularised_objective(a, values, observed, 0.1),
                       (err * observed).sum((1, 2)) / observed.sum((1, 2))
                       + 0.1 * torch.linalg.matrix_norm(a, ord="nuc"))
    change = ((b - values.double()) ** 2).mean().item() / err.mean().item() - 1
    assert solver_agreement(a, b, values, observed, 0.1)["L change"] == pytest.approx(change, rel=1e-12)

    pred = values.reshape(16, -1) + 0.2 * torch.randn(16, 20, generator=gen)  # a model's float32 (B, m·n) output
    X, missing = values, ~observed
    to_x, to_neg = (pred.reshape(X.shape) - X) ** 2, (pred.reshape(X.shape) + X) ** 2
    by_hand = [to_x[missing].mean().item(), to_neg[missing].mean().item(),
               to_x[~missing].mean().item(), to_neg[~missing].mean().item()]
    table = patching_table({"site": pred}, Batch(torch.zeros(16, 20, dtype=torch.long), values, observed))
    assert table.loc["site"].tolist() == pytest.approx(by_hand, rel=1e-6)
