"""The prospective alarm: past-only, frozen thresholds that the fit on seeds 0-4 reproduces, and its scoring."""

import pandas as pd
import pytest

from matcomp.analysis import alarm
from matcomp.analysis.progress import recorded_path
from matcomp.book.build.plan import plan
from matcomp.book.chapters.progress import CHAPTER, alarm_values
from matcomp.runs.shipped import find_reference
from matcomp.sizes import chapter_sizes


def fit_tables() -> dict[int, tuple[pd.DataFrame, int | None]]:
    """Seed -> the measures and drop step of each run ``alarm.FROZEN`` was fitted on: the progress chapter's first
    ``progress_seeds`` runs at ``cpu`` as ``plan`` lists them (``progress.runs_read``: the fitted seeds first),
    read from the tables recorded with the shipped runs at the chapter's default samples."""
    fitted = [p.cfg for p in plan("cpu", ["progress"])][:chapter_sizes("cpu").progress_seeds]
    runs = {cfg.train.seed: find_reference(cfg) for cfg in fitted}
    samples = CHAPTER.defaults("cpu")["samples"]
    return {seed: (pd.read_csv(recorded_path(run, samples, 0), index_col="step"), run.drop.half_step)
            for seed, run in runs.items() if run is not None}


def test_the_frozen_thresholds_are_the_fit_on_seeds_0_to_4():
    tables = fit_tables()
    assert list(tables) == [0, 1, 2, 3, 4]  # every one shipped
    for name in alarm.SIGNALS:
        fitted = alarm.fit_threshold([(alarm.signal(t, name, 4, 4, 1 / 9), drop) for t, drop in tables.values()])
        assert fitted == pytest.approx(alarm.FROZEN[name], rel=2e-3)
    scores = alarm.score(tables, 4, 4, 1 / 9)
    assert (scores["verdict"] == "hit").all()  # no false alarm on the runs it was fitted on, by construction
    assert list(scores.loc[(0, "attention")][["alarm step", "lead (steps)"]]) == [3850, 1217]
    assert alarm.lead_over_loss(scores).tolist() == [450, 350, 450, 350, 500]


def test_the_alarm_reads_only_the_past():
    steps = range(0, 5000, 50)
    values = pd.Series([0.0] * 60 + [1.0] * 40, index=steps)
    table = pd.DataFrame({"row attention": 0.1875 * (1 + values), "column attention": 0.1875,
                          "L_mask (batch)": 1 / 9}, index=steps)
    later = table.copy()
    later.loc[4000:, "row attention"] = 0.1875 * 5  # changing the future changes nothing before it
    a, b = (alarm.signal(t, "attention", 4, 4, 1 / 9) for t in (table, later))
    pd.testing.assert_series_equal(a.loc[:3950], b.loc[:3950])
    assert alarm.alarm_step(a, 0.5) == 3050  # the trailing mean of 3 checkpoints crosses 0.5 at the second


@pytest.mark.parametrize("alarm_at, drop, outcome, lead", [
    (4000, 5000, "hit", 1000), (2000, 5000, "false alarm (early)", None), (5100, 5000, "miss", None),
    (None, 5000, "miss", None), (3000, None, "false alarm (no drop)", None), (None, None, "quiet (no drop)", None)])
def test_outcomes(alarm_at, drop, outcome, lead):
    out = alarm.ScoredRun(alarm_at, drop)
    assert (out.outcome, out.lead) == (outcome, lead)


def test_an_unknown_signal_is_named():
    with pytest.raises(ValueError, match="signal must be one of"):
        alarm.signal(pd.DataFrame(), "norm", 4, 4, 1 / 9)


def test_the_verdict_says_whether_the_lead_holds():
    scores = alarm.score(fit_tables(), 4, 4, 1 / 9)
    values = alarm_values(scores, resolution=50)
    assert values == {"alarm_runs": "5", "alarm_att_hits": "5", "alarm_att_false_alarms": "0", "alarm_att_misses": "0",
                      "alarm_loss_hits": "5", "alarm_loss_false_alarms": "0", "alarm_loss_misses": "0",
                      "alarm_lead": "where both hit (5 runs), attention comes first by a median of 450 steps "
                                    "(350 to 500)",
                      "alarm_holds": "holds"}
    assert alarm_values(scores, resolution=500)["alarm_holds"] == "does not hold"


def test_a_run_with_no_drop_scores_each_alarm_as_a_false_alarm():
    scores = alarm.score({7: (fit_tables()[0][0], None)}, 4, 4, 1 / 9)
    assert scores["alarm step"].tolist() == [3850, 4300] and scores["drop step"].isna().all()
    assert scores["verdict"].tolist() == ["false alarm (no drop)"] * 2
    assert list(scores.index) == [(7, "attention"), (7, "loss")]
