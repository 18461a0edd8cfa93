import nbformat
import pandas as pd
import pytest

from matcomp.book.build.sweep import collect, config_environment, grid, point_name, run_sweep
from matcomp.main import main

pytestmark = pytest.mark.xdist_group("ray")  # with test_prepare.py's: on one test worker, so Ray starts once


@pytest.fixture
def chapter(tmp_path):
    """A two-cell chapter: parameters x and fail, and a cell that records y = 2x (or raises)."""
    params = nbformat.v4.new_code_cell("x = 1\nfail = False")
    params.metadata["tags"] = ["parameters"]
    body = nbformat.v4.new_code_cell("from matcomp.book.build.sweep import record\n"
                                     "assert not fail, 'asked to fail'\nrecord(y=2 * x, label=f'x={x}')")
    path = tmp_path / "chapter.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[params, body], metadata={"kernelspec": {
        "name": "python3", "display_name": "Python 3", "language": "python"}}), path)
    return path


def test_grid_is_the_product_of_the_axes():
    assert grid(a=[1, 2], b=["u", "v"]) == [{"a": 1, "b": "u"}, {"a": 1, "b": "v"},
                                           {"a": 2, "b": "u"}, {"a": 2, "b": "v"}]
    with pytest.raises(ValueError, match="'seed' needs a non-empty list"):
        grid(seed=[])
    with pytest.raises(ValueError, match="'overrides' needs a non-empty list"):
        grid(overrides="model.layers=2")  # a bare string is not a list of values


def test_sweep_runs_each_point_once_and_collects_the_records(chapter, tmp_path):
    out = tmp_path / "out"
    notebooks = run_sweep(chapter, grid(x=[3, 1]), out)
    environment = config_environment()  # the tests' $MATCOMP_PRESET
    assert [p.name for p in notebooks] == [point_name(chapter, {"x": 3}, environment),
                                           point_name(chapter, {"x": 1}, environment)]
    table = collect(out, notebooks)
    assert table["x"].tolist() == [3, 1] and table["y"].tolist() == [6, 2]
    assert table["label"].tolist() == ["x=3", "x=1"]
    stamp = notebooks[0].stat().st_mtime_ns
    run_sweep(chapter, grid(x=[3]), out)  # done already: not executed again
    assert notebooks[0].stat().st_mtime_ns == stamp


def test_a_failing_point_is_reported_after_the_others_run(chapter, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(RuntimeError, match="(?s)1 of 2 sweep points failed.*asked to fail"):
        run_sweep(chapter, grid(fail=[True, False]), out)
    failed = out / point_name(chapter, {"fail": True}, config_environment())
    assert len(collect(out)) == 1 and failed.with_suffix(".running.ipynb").exists()


def test_sweep_command_writes_the_collected_table(chapter, tmp_path, capsys):
    out = tmp_path / "cli"
    main(["sweep", str(chapter), "--out", str(out), "--param", "x", "5", "7", "--quiet"])
    assert "2 notebooks collected" in capsys.readouterr().out
    table = pd.read_csv(out / "results.csv")
    assert table["notebook"].tolist() == [point_name(chapter, {"x": 5}, config_environment()),
                                         point_name(chapter, {"x": 7}, config_environment())]
    assert table["y"].tolist() == [10, 14] and table["label"].tolist() == ["x=5", "x=7"]
    with pytest.raises(SystemExit, match="--fixed: expected NAME=VALUE"):
        main(["sweep", str(chapter), "--out", str(out), "--param", "x", "1", "--fixed", "x"])
    with pytest.raises(SystemExit, match="does not exist"):
        main(["sweep", str(tmp_path / "nope.ipynb"), "--out", str(out), "--param", "x", "1"])


def test_sweep_on_two_ray_workers_collects_what_the_serial_sweep_does(chapter, tmp_path, capsys, local_ray):
    main(["sweep", str(chapter), "--out", str(tmp_path / "ray"), "--param", "x", "5", "7", "9", "--workers", "2",
          "--quiet"])
    assert "3 notebooks collected" in capsys.readouterr().out
    table = pd.read_csv(tmp_path / "ray" / "results.csv")
    assert table["y"].tolist() == [10, 14, 18] and not list((tmp_path / "ray").glob("*.running.ipynb"))
    with pytest.raises(ValueError, match="workers must be >= 1"):
        run_sweep(chapter, grid(x=[1]), tmp_path / "none", workers=0)


def test_sweep_command_says_each_point_as_it_finishes_unless_quiet(chapter, tmp_path, capsys):
    main(["sweep", str(chapter), "--out", str(tmp_path / "o"), "--param", "x", "5", "7"])
    out = capsys.readouterr().out
    assert "chapter.ipynb: 2 points into" in out and ", 0 done already" in out
    assert "point 1 of 2 finished: {'x': 5}, done in" in out and "point 2 of 2 finished: {'x': 7}, done in" in out
    main(["sweep", str(chapter), "--out", str(tmp_path / "q"), "--param", "x", "5", "--quiet"])
    assert "point 1 of 1" not in capsys.readouterr().out
