"""A test reads the build's execution of a chapter only where the build executed that very code with today's
inputs (``matcomp.book.build.executed``); anything else leaves it to execute the chapter itself."""

import nbformat
import pytest
from jupyter_cache import get_cache

import matcomp.book.build.executed as executed


@pytest.fixture
def cached(tmp_path):
    """A notebook executed into a jupyter-cache, as the build's executor leaves it."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1)")])
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", text="1\n")]
    path = tmp_path / "chapter.ipynb"
    nbformat.write(nb, path)
    cache = get_cache(tmp_path / "cache")
    cache.cache_notebook_file(path, check_validity=False)
    return cache, path


def test_a_chapter_executed_with_todays_inputs_is_read_and_any_change_of_them_executes_it_again(cached, monkeypatch):
    cache, path = cached
    assert executed.build_execution(path, cache.path) is None  # nothing noted: the build did not say its inputs
    executed.record_inputs(cache, [str(path)], executed.inputs_fingerprint())
    read = executed.build_execution(path, cache.path)
    assert read is not None and read.cells[0].outputs[0].text == "1\n"
    assert executed.build_wrote(path, cache.path) is None  # what it wrote into the repository: not said
    executed.record_inputs(cache, [str(path)], executed.inputs_fingerprint(), ["?? book/out.ipynb"])
    assert executed.build_wrote(path, cache.path) == ["?? book/out.ipynb"]
    monkeypatch.setenv("MATCOMP_SEED", "3")  # another seed: other inputs, so executed again
    assert executed.build_execution(path, cache.path) is None
    monkeypatch.delenv("MATCOMP_SEED")
    monkeypatch.setattr(executed, "inputs_fingerprint", lambda: "the library changed since")
    assert executed.build_execution(path, cache.path) is None
    nb = nbformat.read(path, as_version=4)
    nb.cells[0].source = "print(2)"  # other code: no cached execution of it at all
    nbformat.write(nb, path)
    assert executed.build_execution(path, cache.path) is None


def test_the_fingerprint_reads_the_library_the_shipped_runs_and_the_settings(monkeypatch):
    before = executed.inputs_fingerprint()
    assert executed.inputs_fingerprint() == before  # the same inputs, the same fingerprint
    monkeypatch.setenv("MATCOMP_SET", "train.lr=2e-3")
    assert executed.inputs_fingerprint() != before


def test_the_build_cache_read_is_the_one_jupyter_book_writes_in_the_repository():
    """The tests read the build's executions from where ``jupyter-book build .`` writes them; a wrong folder never
    fails a test, it only executes every chapter again (as it did when the module moved one folder down)."""
    from matcomp.runs.shipped import REPO

    assert executed.BUILD_CACHE == REPO / "_build" / ".jupyter_cache"


def test_only_a_clean_builds_pages_of_todays_sources_are_taken_as_rendered_today(tmp_path):
    from types import SimpleNamespace

    root, html = tmp_path / "book_root", tmp_path / "book_root" / "_build" / "html"
    (root / "book").mkdir(parents=True)
    html.mkdir(parents=True)
    (root / "_config.yml").write_text("title: t\n")
    (root / "book" / "page.txt").write_text("# one\n")

    def build(warnings: int, error: Exception | None = None, builder: str = "html") -> None:
        app = SimpleNamespace(outdir=str(html), confdir=str(root), _warncount=warnings,
                              builder=SimpleNamespace(name=builder))
        executed.record_render(app, error)

    assert not executed.rendered_today(html, root)  # no build noted
    build(0)
    assert executed.rendered_today(html, root)
    (root / "book" / "page.txt").write_text("# two\n")  # a page changed since: its pages are not today's
    assert not executed.rendered_today(html, root)
    build(0)
    assert executed.rendered_today(html, root)
    build(1)  # a build that warned leaves no note, even over a clean one's
    assert not executed.rendered_today(html, root)
    build(0, RuntimeError("a page failed"))
    assert not executed.rendered_today(html, root)
    build(0, builder="latex")
    assert not executed.rendered_today(html, root)
