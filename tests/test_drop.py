import numpy as np
import pandas as pd
import pytest

from matcomp.drop import detect_drop, leave_step


def curve(drop_at=None, plateau=2 / 9, after=0.005, steps=6000, noise=0.02, seed=0):
    """A synthetic L_mask: fast fall to the plateau, then (optionally) a sigmoid drop."""
    rng = np.random.default_rng(seed)
    step = np.arange(1, steps + 1)
    level = plateau + 0.4 * np.exp(-step / 10)
    if drop_at is not None:
        level = level - (plateau - after) / (1 + np.exp(-(step - drop_at) / 50))
    return pd.DataFrame({"step": step, "L_mask": level * (1 + noise * rng.standard_normal(steps))})


def test_finds_plateau_and_drop_steps():
    d = detect_drop(curve(drop_at=3000))
    assert d.plateau == pytest.approx(2 / 9, rel=0.01)
    assert d.dropped and 2950 <= d.half_step <= 3050
    # below plateau/10 = 0.0222 when the sigmoid is ~92 % done: about 2.4 widths after its middle
    assert 3080 <= d.tenfold_step <= 3180
    assert d.final == pytest.approx(0.005, rel=0.05) and d.factor > 40


def test_no_drop_on_a_plateau():
    d = detect_drop(curve(drop_at=None))
    assert not d.dropped and d.tenfold_step is None and d.factor == pytest.approx(1, abs=0.02)
    assert "none" in str(d)


def test_bad_arguments():
    with pytest.raises(ValueError, match="window"):
        detect_drop(curve(), window=0)
    with pytest.raises(ValueError, match="skip"):
        detect_drop(curve(steps=50), skip=100)


def test_leave_step_ends_a_plateau_at_a_given_level():
    # 0.9 x plateau: a tenth of the way down the sigmoid, 2.2 widths (110 steps) before its middle
    assert 2860 <= leave_step(curve(drop_at=3000), 2 / 9) <= 2920
    assert leave_step(curve(drop_at=None), 2 / 9) is None
    # measured against a higher level, a curve that never sits there leaves at once
    assert leave_step(curve(drop_at=3000), 0.5) == 101
    with pytest.raises(ValueError, match="near"):
        leave_step(curve(), 2 / 9, near=1.5)
    with pytest.raises(ValueError, match="level"):
        leave_step(curve(), 0)
