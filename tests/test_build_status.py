"""The status page's tables: each chapter's latest execution read from the build's cache, the machine, the versions."""

import nbformat
from jupyter_cache import get_cache
from jupyter_cache.base import CacheBundleIn

from matcomp.book.build.build_status import chapter_rows, machine_rows, version_rows
from matcomp.book.chapters import CHAPTERS


def test_each_chapter_gets_its_latest_execution_in_the_books_order(tmp_path):
    cache = get_cache(tmp_path / "cache")
    for seconds, source in ((12.5, "x = 1"), (3.25, "x = 2")):  # two executions of one chapter: the later counts
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
        cache.cache_notebook_bundle(CacheBundleIn(nb, str(tmp_path / "task.ipynb"),
                                                  data={"execution_seconds": seconds}), check_validity=False)
    rows = chapter_rows(tmp_path / "cache")
    assert [row[0] for row in rows] == list(CHAPTERS)
    task = rows[CHAPTERS.index("task")]
    assert task[2] == "3.2" and len(task[1]) == 19 and task[1][4] == "-"  # 3.25 s, "YYYY-MM-DD hh:mm:ss"
    assert all(row[1:] == ["", ""] for row in rows if row[0] != "task")  # never executed: blank, not invented
    assert chapter_rows(tmp_path / "none") == [[name, "", ""] for name in CHAPTERS]


def test_the_machine_and_versions_are_read_from_this_machine():
    machine = dict(machine_rows())
    assert machine["cores"].isdigit() and machine["memory"].endswith("GiB") and machine["preset"]
    versions = dict(version_rows())
    assert versions["torch"].startswith("2.13.0") and versions["jupyter-book"].startswith("1.")
