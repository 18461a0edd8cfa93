"""The chapters whose models differ between the smoke preset, at which the test command runs the book,
and the default ``cpu`` scale, executed at ``cpu`` with training forbidden, as the default build runs
them: the one-model chapters (they read the shipped ``cpu7x7`` run) and the width/depth chapter (its
papermill sweep re-reads the 4×4 depth runs). A chapter that asked for a run not shipped would fail
here rather than only in the default build."""

import json
import re
from pathlib import Path

import nbformat
import papermill
import pytest

from matcomp.book.build.executed import build_execution
from matcomp.book.chapters import chapter_spec
from matcomp.drop import detect_drop
from matcomp.presets import preset_config
from matcomp.runs.run import Run
from matcomp.runs.shipped import REFERENCE_ROOT, find_reference
from matcomp.runs.store import ENV_NO_TRAINING

BOOK = Path(__file__).resolve().parents[1] / "book"


def one_model_chapters() -> list[str]:
    """The chapters whose parameters cell has a ``one_model`` parameter: they analyse one trained model."""
    def parameters(path: Path) -> str:
        return next(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")

    declared = re.compile(r"^one_model\s*(?::[^=\n]*)?=", re.M)
    return sorted(p.stem for p in BOOK.glob("*.ipynb") if declared.search(parameters(p)))


TEXT_FORMATS = ("text/plain", "text/markdown", "text/html")  # printed lines, findings and styled tables


def outputs_text(path: Path) -> str:
    """Every text output of an executed notebook, joined: streams and each text form of displayed data."""
    cells = json.loads(path.read_text())["cells"]
    return "".join("".join(out.get("text") or "") + "".join("".join(out.get("data", {}).get(kind) or "")
                                                          for kind in TEXT_FORMATS)
                   for cell in cells if cell["cell_type"] == "code" for out in cell["outputs"])


def executed_at_default_scale(chapter: str, tmp_path: Path) -> Path:
    """The chapter executed as the default build executes it: read from the build just run where it executed
    this code with today's library, shipped runs and settings (``matcomp.book.build.executed``; every run the chapter
    reads then checked shipped, as training is forbidden here), else executed here."""
    out = tmp_path / f"{chapter}.ipynb"
    built = build_execution(BOOK / f"{chapter}.ipynb")
    if built is not None:
        assert all(find_reference(cfg) is not None for cfg in chapter_spec(chapter).runs("cpu")), f"{chapter} trains"
        nbformat.write(built, out)
        return out
    papermill.execute_notebook(BOOK / f"{chapter}.ipynb", out, cwd=BOOK, kernel_name="python3", progress_bar=False)
    return out


@pytest.fixture
def default_scale(monkeypatch):
    monkeypatch.setenv("MATCOMP_PRESET", "cpu")
    monkeypatch.setenv(ENV_NO_TRAINING, "1")


def test_the_one_model_chapters_are_the_eight_that_analyse_one_trained_model():
    assert one_model_chapters() == ["attention_patching", "copying_phase", "embeddings", "head_taxonomy",
                                    "nuclear_norm", "observed_entries", "probing", "sudden_drop"]


@pytest.mark.slow
@pytest.mark.parametrize("chapter", one_model_chapters())
def test_a_one_model_chapter_runs_on_the_shipped_7x7_run(chapter, default_scale, tmp_path):
    run = find_reference(preset_config("cpu7x7"))
    assert run is not None, "no shipped run matches the cpu7x7 preset"
    drop = detect_drop(run.metrics).half_step
    # (nuclear_norm's slow baselines are read from the tables shipped beside the run, runs/reference/derived)
    text = outputs_text(executed_at_default_scale(chapter, tmp_path))
    assert str(drop) in text or f"{drop:,}" in text, f"{chapter} does not show the cpu7x7 run's drop step {drop}"


SWEPT_TABLE = "the depth sweep's points, one papermill run each"  # the caption of width_depth's sweep table


def swept_runs(executed: nbformat.NotebookNode) -> list[str]:
    """The run each point of width_depth's depth sweep read, from the chapter's table of its points."""
    table = next(out["data"]["text/plain"] for cell in executed.cells if cell.cell_type == "code"
                 for out in cell.get("outputs", []) if SWEPT_TABLE in out.get("data", {}).get("text/plain", ""))
    return re.findall(r"\b(cpu-[0-9a-f]{10})\b", table)


@pytest.mark.slow
def test_the_depth_sweep_runs_on_the_shipped_4x4_runs(default_scale, tmp_path):
    """Each of the sweep's three points finishes and reads the 4×4 run at its depth (not cpu7x7, which the
    one-model chapters read); read from the build where it executed the chapter with today's inputs (every run
    the chapter and its points read then checked shipped, as training is forbidden here), else executed here."""
    built = build_execution(BOOK / "width_depth.ipynb")
    if built is not None:
        assert all(find_reference(cfg) is not None for cfg in chapter_spec("width_depth").runs("cpu")), "it trains"
        runs = swept_runs(built)
        shipped = [Run(REFERENCE_ROOT / run_id) for run_id in runs]  # a point's run is shipped, or it trained
        shapes = {(run.config.data.n_rows, run.config.data.n_cols, run.config.data.rank) for run in shipped}
        assert len(runs) == 3 and shapes == {(4, 4, 1)}, f"a point read another run than the 4×4's: {runs}"
        assert sorted(run.config.model.layers for run in shipped) == [2, 4, 6], "a point is not at its own depth"
        return
    out = tmp_path / "width_depth.ipynb"
    papermill.execute_notebook(BOOK / "width_depth.ipynb", out, cwd=BOOK, kernel_name="python3",
                               progress_bar=False, parameters={"sweep_out": str(tmp_path / "sweep")})
    swept = sorted(p.name for p in (tmp_path / "sweep").glob("*.ipynb"))
    assert len(swept) == 3 and not any("running" in name for name in swept)
    assert all("4x4 rank 1" in outputs_text(tmp_path / "sweep" / name) for name in swept), "a point read cpu7x7"
    assert len(swept_runs(nbformat.read(out, as_version=4))) == 3  # the table the build's execution is read by


@pytest.mark.slow
def test_the_progress_chapter_scores_the_frozen_alarm_on_the_shipped_held_out_seeds_and_larger_tasks(
        default_scale, tmp_path):
    text = outputs_text(executed_at_default_scale("progress", tmp_path))
    assert "held out: seeds 5, 6, 7, 8, 9, 10, 11, 12" in text and "every held-out run under both rules" in text
    assert "the larger tasks' runs under both rules, scored unchanged" in text
    assert "5×5 (cpu5x5): seed 0" in text and "7×7 (cpu7x7): seed 0" in text
