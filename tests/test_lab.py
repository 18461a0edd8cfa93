"""A chapter run as a reader runs it in JupyterLab (``scripts/check_lab.py``): Run All in a real JupyterLab driven
in Chromium shows the chapter's quoted numbers and verdict words, no raw role, and an explorer that answers."""

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from matcomp.drop import SMOOTHING

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

pytestmark = pytest.mark.skipif(not (shutil.which("chromium") and importlib.util.find_spec("playwright")),
                                reason="needs Debian's chromium and Playwright (.ci/run installs both)")


def test_the_lab_check_refuses_a_missing_chapter(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "check_lab.py"), "--chapter",
                           str(tmp_path / "absent")], capture_output=True, text=True)
    assert done.returncode == 2 and "no notebook" in done.stderr


@pytest.mark.slow
def test_a_chapter_run_in_jupyterlab_shows_its_numbers_and_verdicts_and_its_explorer_answers():
    from check_lab import check_chapter

    chapter = ROOT / "book" / "sudden_drop.ipynb"
    before = chapter.read_bytes()
    problems, prose = check_chapter(chapter, [f"smoothed over {SMOOTHING} steps", "(as the paper on "], 600)
    assert not problems, "\n".join(problems)
    assert "(figure)" in prose  # a figure link, which the book numbers
    assert chapter.read_bytes() == before  # JupyterLab ran a copy: its autosave never reaches book/
