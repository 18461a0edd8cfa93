import numpy as np
import pandas as pd
import pytest

from matcomp.drop import detect_drop, drop_settled, leave_step


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
    with pytest.raises(ValueError, match="too short to have a plateau: the table ends at step 50.*after step 100"):
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


def test_a_settled_drop_is_the_drop_of_the_whole_run():
    whole = curve(drop_at=3000)
    half = detect_drop(whole).half_step
    for end in (half + 40, half + 300, half + 2000):  # the half step of every prefix that calls it settled
        prefix = whole[whole.step <= end]
        assert drop_settled(prefix, 300) == (end >= half + 300)
        if drop_settled(prefix, 51):
            assert detect_drop(prefix).half_step == half
    assert not drop_settled(curve(drop_at=None), 300)
    assert not drop_settled(curve(drop_at=200, steps=540), 51)  # the plateau's estimate is not whole yet
    no_plateau = curve(drop_at=None, plateau=0.02)  # already far below a copying level of 2/9
    assert not drop_settled(no_plateau, 300) and not drop_settled(no_plateau[no_plateau.step <= 849], 300, level=2 / 9)
    assert drop_settled(no_plateau[no_plateau.step <= 850], 300, level=2 / 9)
    assert not drop_settled(curve(drop_at=None), 300, level=2 / 9)  # on the plateau: not settled
    with pytest.raises(ValueError, match="after must be an integer >= 51"):
        drop_settled(whole, 50)
