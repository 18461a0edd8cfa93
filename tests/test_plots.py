import numpy as np
import pandas as pd

from matcomp.drop import detect_drop
from matcomp.plots import loss_curves


def test_loss_curves_draws_three_smoothed_losses_and_the_drop():
    step = np.arange(1, 2001)
    l_mask = np.where(step < 1000, 0.11, 0.01)
    metrics = pd.DataFrame({"step": step, "L_mask": l_mask, "L_obs": np.full(2000, 1e-4), "L": 0.3 * l_mask})
    drop = detect_drop(metrics)
    ax = loss_curves(metrics, drop=drop, plateau=1 / 9)
    labels = [line.get_label() for line in ax.get_lines()]
    assert sum(label.startswith("$L") for label in labels) == 3
    assert any(label == f"drop (step {drop.half_step})" for label in labels)
    assert ax.get_yscale() == "log"
    smoothed_mask = ax.get_lines()[3].get_ydata()  # raw L_mask first, then L, L_obs, L_mask
    assert np.nanmax(smoothed_mask) == 0.11 and np.nanmin(smoothed_mask) == 0.01
