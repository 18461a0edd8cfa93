"""The size ladder's verdicts (``matcomp.book.ladder``) on numbers whose verdict is known."""

from types import SimpleNamespace

import pandas as pd

from matcomp.book.ladder import VERDICTS, drop_ladder, ladder_findings, ladder_table, ladder_verdict
from matcomp.presets import preset


def test_each_verdict_is_given_where_it_holds():
    assert ladder_verdict([5060, 6812, 16406], 15000) == "reproduces"  # the largest task within a quarter
    assert ladder_verdict([0.5, 2.0, 8.0], 40, reference=1) == "moves toward the paper as the task grows"
    assert ladder_verdict([44.6, 7.3], 40, reference=1) == "direction only"  # the effect, not its size, at 7x7
    assert ladder_verdict([0.95, 0.013], 0.014) == "reproduces" and ladder_verdict([0.2, 0.95], 0.014) == "does not"
    assert ladder_verdict([float("nan"), 3.0], 40, reference=1) == "direction only"  # a task without the number
    assert ladder_verdict([float("nan")], 40) == "does not"


def test_the_table_holds_every_task_the_paper_and_the_verdicts():
    table = ladder_table({"4×4": {"a": 1.0, "b": 5.0}, "7×7": {"a": 1.9, "b": 5.0}}, {"a": 2.0, "b": 50.0},
                         references={"b": 1.0})
    assert table.index.tolist() == ["4×4", "7×7", "paper", "verdict"]
    assert table.loc["verdict"].tolist() == ["reproduces", "direction only"]
    assert set(table.loc["verdict"]) <= set(VERDICTS)
    assert ladder_findings(table)[1] == "b: direction only (7×7: 5; the paper: 50)."


def run(n: int, plateau: float, half_step: int | None, final: float):
    cfg = preset("cpu", {"data.n_rows": n, "data.n_cols": n})
    drop = SimpleNamespace(plateau=plateau, half_step=half_step, factor=plateau / final)
    return SimpleNamespace(config=cfg, drop=drop)


def test_the_drop_ladder_reads_each_run_against_the_papers_run():
    table = drop_ladder({"4×4": run(4, 1 / 9, 5000, 0.02), "7×7": run(7, 1 / 9, None, 0.1)})
    assert table.loc["4×4", "drop step"] == 5000 and pd.isna(table.loc["7×7", "drop step"])
    assert abs(table.loc["paper", "× below the plateau"] - 16.77) < 0.01  # 0.2236 / (4e-3 / 0.3)
    assert abs(table.loc["paper", "plateau / E[X²]"] - 1.006) < 0.001  # 0.2236 against 2/9
    assert table.loc["verdict", "drop step"] == "does not"  # the largest task does not drop
    assert table.loc["verdict", "× below the plateau"] == "does not"  # 7x7 ends 1.1x below: no drop at all
    dropped = drop_ladder({"4×4": run(4, 1 / 9, 5000, 0.02), "7×7": run(7, 1 / 9, 16000, 0.025)})
    assert dropped.loc["verdict", "× below the plateau"] == "direction only"  # 4.4x, not the paper's 17x
