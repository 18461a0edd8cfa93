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
