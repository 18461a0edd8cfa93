"""The chapters' markup read alike in the book and in JupyterLab (``matcomp.book.markup``): quoted values bound in
the kernel as JupyterLab's ``{eval}`` reads them and read back by the book's ``eval`` role from what the chapter
glued; figure links numbered in the book."""

import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.display import Markdown

from matcomp.book.markup import Text, glue_quoted

VERDICTS = "- where:\n  - key: **as the paper** (3 of 4)"


@pytest.fixture
def shell():
    shell = InteractiveShell.instance()
    yield shell
    InteractiveShell.clear_instance()


def test_quoted_values_are_bound_as_the_sentence_shows_them(shell):
    glue_quoted({"window": 25, "ratio": "0.93", "verdicts": Markdown(VERDICTS)})
    assert repr(shell.user_ns["window"]) == "25" and isinstance(shell.user_ns["window"], Text)
    assert repr(shell.user_ns["ratio"]) == "0.93"  # no quotes, as JupyterLab shows an expression's text/plain
    assert shell.user_ns["verdicts"].data == VERDICTS
    glue_quoted({"window": 50})  # quoting again replaces an earlier quote
    assert shell.user_ns["window"] == "50"


def test_a_quote_never_replaces_a_chapter_variable_nor_takes_a_name_eval_cannot_read(shell):
    shell.user_ns["steps"] = [1, 2]
    with pytest.raises(ValueError, match=r"replace the chapter's own variable steps \(list\)"):
        glue_quoted({"steps": 3})
    assert shell.user_ns["steps"] == [1, 2]
    for bad in ("drop-step", "class", "2x"):
        with pytest.raises(ValueError, match="must be a Python name"):
            glue_quoted({bad: 1})


def page(markdown: str, code: str, figure: str | None = None, caption: str = "a figure") -> nbformat.NotebookNode:
    """A page of a markdown cell and a code cell (its figure named ``figure``, with ``caption``)."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(markdown), nbformat.v4.new_code_cell(code)])
    if figure:
        nb.cells[1].metadata["mystnb"] = {"figure": {"name": figure, "caption": caption}}
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def book(root: Path, **pages: nbformat.NotebookNode) -> subprocess.CompletedProcess:
    """Build a book of ``pages`` (the first its root) with the quoted-value extension, as ``_config.yml`` does,
    warnings as errors."""
    (root / "_config.yml").write_text("title: t\nexecute:\n  execute_notebooks: cache\n"
                                      "sphinx:\n  extra_extensions: [matcomp.book.markup]\n")
    first, *others = pages
    chapters = "chapters:\n" + "".join(f"- file: {name}\n" for name in others) if others else ""
    (root / "_toc.yml").write_text(f"format: jb-book\nroot: {first}\n{chapters}")
    for name, nb in pages.items():
        nbformat.write(nb, root / f"{name}.ipynb")
    command = shutil.which("jupyter-book", path=Path(sys.executable).parent) or shutil.which("jupyter-book")
    return subprocess.run([command, "build", "-W", str(root)], capture_output=True, text=True, timeout=300)


CODE = f"from IPython.display import Markdown\nfrom matcomp.book.markup import glue_quoted\n" \
       f"glue_quoted({{'window': 25, 'verdicts': Markdown({VERDICTS!r})}})"
# the pages that build: one book for both (a jupyter-book build costs about 6 s), read by the tests on one worker
BUILDS = pytest.mark.xdist_group("markup")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """The HTML folder of a book whose first page quotes a text inline and markdown as a block, and whose second
    quotes a value in a figure's caption."""
    root = tmp_path_factory.mktemp("book")
    done = book(root, inline=page("# Page\n\nVerdicts:\n\n{eval}`verdicts`\n\nSmoothed over {eval}`window` steps "
                                  "([figure](#fig-code)).", CODE + "\n'drawn'", figure="fig-code"),
                caption=page("# Page\n\nA figure ([figure](#fig-plot)).",
                             CODE + "\nimport matplotlib.pyplot as plt\nplt.plot([0, 1]);", figure="fig-plot",
                             caption="Smoothed over {eval}`window` steps."))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return root / "_build" / "html"


@BUILDS
@pytest.mark.slow
def test_the_book_shows_a_quoted_text_inline_and_quoted_markdown_as_blocks(built):
    html = (built / "inline.html").read_text()
    assert 'Smoothed over <span class="pasted-text">25</span> steps' in html
    assert "<li><p>key: <strong>as the paper</strong> (3 of 4)</p></li>" in html
    assert "<p><ul" not in html.replace("\n", "")  # the list stands as a block, not inside the role's paragraph
    # the link JupyterLab shows as "figure" is numbered in the book, as {numref} numbers the figure a cell drew
    assert '(<a class="reference internal" href="#fig-code"><span class="std std-numref">figure 1</span></a>)' in html


@pytest.mark.slow
def test_the_book_names_an_eval_it_cannot_read(tmp_path):
    done = book(tmp_path, page=page("# Page\n\nA sum {eval}`window + 1` and a name {eval}`nowhere`.", CODE))
    out = done.stdout + done.stderr
    assert done.returncode != 0
    assert "'window + 1' is not a name" in out


@BUILDS
@pytest.mark.slow
def test_a_figure_caption_quotes_a_value_the_chapter_glued(built):
    """The paper's model's figures say in their caption where its run stopped, a value computed by the chapter."""
    html = (built / "caption.html").read_text()
    assert 'Smoothed over <span class="pasted-text">25</span> steps.' in html.split("<figcaption>")[1]
