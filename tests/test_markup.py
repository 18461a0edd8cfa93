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


def book(root: Path, markdown: str, code: str, figure: str | None = None,
         caption: str = "a figure") -> subprocess.CompletedProcess:
    """Build a one-page book with the quoted-value extension, as ``_config.yml`` does, warnings as errors."""
    (root / "_config.yml").write_text("title: t\nexecute:\n  execute_notebooks: cache\n"
                                      "sphinx:\n  extra_extensions: [matcomp.book.markup]\n")
    (root / "_toc.yml").write_text("format: jb-book\nroot: page\n")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(markdown), nbformat.v4.new_code_cell(code)])
    if figure:
        nb.cells[1].metadata["mystnb"] = {"figure": {"name": figure, "caption": caption}}
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, (root / "page").with_suffix(".ipynb"))  # the page _toc.yml names
    command = shutil.which("jupyter-book", path=Path(sys.executable).parent) or shutil.which("jupyter-book")
    return subprocess.run([command, "build", "-W", str(root)], capture_output=True, text=True, timeout=300)


CODE = f"from IPython.display import Markdown\nfrom matcomp.book.markup import glue_quoted\n" \
       f"glue_quoted({{'window': 25, 'verdicts': Markdown({VERDICTS!r})}})"


@pytest.mark.slow
def test_the_book_shows_a_quoted_text_inline_and_quoted_markdown_as_blocks(tmp_path):
    done = book(tmp_path, "# Page\n\nVerdicts:\n\n{eval}`verdicts`\n\nSmoothed over {eval}`window` steps "
                          "([figure](#fig-code)).", CODE + "\n'drawn'", figure="fig-code")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    html = (tmp_path / "_build/html/page.html").read_text()
    assert 'Smoothed over <span class="pasted-text">25</span> steps' in html
    assert "<li><p>key: <strong>as the paper</strong> (3 of 4)</p></li>" in html
    assert "<p><ul" not in html.replace("\n", "")  # the list stands as a block, not inside the role's paragraph
    # the link JupyterLab shows as "figure" is numbered in the book, as {numref} numbers the figure a cell drew
    assert '(<a class="reference internal" href="#fig-code"><span class="std std-numref">figure 1</span></a>)' in html


@pytest.mark.slow
def test_the_book_names_an_eval_it_cannot_read(tmp_path):
    done = book(tmp_path, "# Page\n\nA sum {eval}`window + 1` and a name {eval}`nowhere`.", CODE)
    out = done.stdout + done.stderr
    assert done.returncode != 0
    assert "'window + 1' is not a name" in out


@pytest.mark.slow
def test_a_figure_caption_quotes_a_value_the_chapter_glued(tmp_path):
    """The paper's model's figures say in their caption where its run stopped, a value computed by the chapter."""
    code = CODE + "\nimport matplotlib.pyplot as plt\nplt.plot([0, 1]);"
    done = book(tmp_path, "# Page\n\nA figure ([figure](#fig-code)).", code, figure="fig-code",
                caption="Smoothed over {eval}`window` steps.")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    html = (tmp_path / "_build/html/page.html").read_text()
    assert 'Smoothed over <span class="pasted-text">25</span> steps.' in html.split("<figcaption>")[1]
