"""The book builds: ``jupyter-book build`` renders every chapter in ``_toc.yml`` and executes those with
widgets (at the smoke preset, set by the top-level conftest), failing on any failing cell; widgets and
formulas are served from the book itself, not from a CDN; Sphinx's warnings are errors, as in the
README's build (``-W``), but for references to the glued numbers and figures of a page left unexecuted
here, which exist only once its cells run. Every chapter is executed on its own by
nbmake (``book/*.ipynb`` in the test paths), but for those this build executes, so none runs twice."""

import ast
import importlib.util
import inspect
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return [toc["root"]] + [c["file"] for part in toc["parts"] for c in part["chapters"]]


def test_every_chapter_is_in_the_toc_and_starts_with_a_parameters_cell_papermill_can_read():
    import nbformat
    from papermill.translators import PythonTranslator

    listed = set(toc_files())
    for path in sorted((ROOT / "book").glob("*.ipynb")):
        assert f"book/{path.stem}" in listed, f"{path.name} is not in _toc.yml"
        nb = nbformat.read(path, as_version=4)
        first = next(c for c in nb.cells if c.cell_type == "code")
        assert "parameters" in first.metadata.get("tags", []), f"{path.name}: first code cell is not tagged"
        assigned = re.findall(r"^(\w+)\s*(?::[^=\n]*)?=", first.source, re.M)  # annotated or not
        seen = [p.name for p in PythonTranslator.inspect(first)]
        assert seen == assigned, f"{path.name}: papermill reads parameters {seen}, the cell sets {assigned}"
        assert not any(c.get("outputs") for c in nb.cells if c.cell_type == "code"), (
            f"{path.name} has outputs (saved by JupyterLab?): clear them before a commit with jupyter nbconvert "
            f"--clear-output --inplace book/{path.name}")
        ids = [c.get("id") for c in nb.cells]
        assert all(ids) and len(set(ids)) == len(ids), f"{path.name}: every cell needs its own id (nbformat 4.5)"


def widget_chapters() -> list[str]:
    notebooks = sorted((ROOT / "book").glob("*.ipynb"))
    return [f"book/{p.stem}" for p in notebooks if "matcomp.book.widgets" in p.read_text()]


def tree_state() -> str:
    """What git sees changed or new in the repository (ignored files aside)."""
    return subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout


def unexecuted_output_warning(warning: str, executed: list[str]) -> bool:
    """The one warning a page left unexecuted here may raise: a reference to what its cells make (a glued
    number, a figure's label), which nbmake executes apart; the README's build executes every page."""
    page = re.search(r"/(book/\w+)\.ipynb:\d+: WARNING: ", warning)
    made_by_cells = re.search(r"No key '\w+' found in glue data|cross-reference target not found: 'fig-[\w-]+'",
                              warning)
    return bool(page and made_by_cells and page.group(1) not in executed)


def test_only_references_to_an_unexecuted_pages_outputs_are_forgiven():
    glue = "/r/book/ood.ipynb:80002: WARNING: No key 'ood_rows' found in glue data for this document."
    figure = "/r/book/ood.ipynb:40004: WARNING: 'myst' cross-reference target not found: 'fig-ood-rows'"
    assert unexecuted_output_warning(glue, ["book/task"]) and unexecuted_output_warning(figure, ["book/task"])
    assert not unexecuted_output_warning(glue, ["book/ood"])  # an executed page must glue what it quotes
    assert not unexecuted_output_warning("/r/book/ood.ipynb:3: WARNING: 'myst' cross-reference target not found: "
                                         "'sec-rows'", [])
    assert not unexecuted_output_warning("/r/intro.md:3: WARNING: No key 'x' found in glue data", [])


def chapter_notebooks() -> list[str]:
    """The pages of ``_toc.yml`` that are chapters (notebooks), in its order."""
    return [name for name in toc_files() if (ROOT / f"{name}.ipynb").exists()]


def built_with_todays_inputs(monkeypatch) -> str | None:
    """The preset at which the README's build (``_build/.jupyter_cache``) executed every chapter with today's code
    and inputs (``matcomp.book.build.executed``): the tests' own preset, else the default (unset) one; None where it
    did not (CI: nothing built first), or did not note what the executions wrote into the repository. Leaves
    ``$MATCOMP_PRESET`` at that preset."""
    from matcomp.book.build.executed import build_execution, build_wrote

    ours = os.environ.get("MATCOMP_PRESET")
    notebooks = [ROOT / f"{name}.ipynb" for name in chapter_notebooks()]
    for preset in dict.fromkeys([ours, None]):
        if preset is None:
            monkeypatch.delenv("MATCOMP_PRESET", raising=False)
        else:
            monkeypatch.setenv("MATCOMP_PRESET", preset)
        if all(build_execution(nb) is not None and build_wrote(nb) is not None for nb in notebooks):
            return preset or "default"
    if ours is not None:
        monkeypatch.setenv("MATCOMP_PRESET", ours)
    return None


@pytest.mark.slow
def test_the_book_builds_and_runs_its_widget_chapters(tmp_path, build_executed, monkeypatch):
    """Built with warnings as errors (but references to what an unexecuted page's cells make); the
    chapters with widgets and those that write files are executed (here only: nbmake leaves them out),
    and the repository is as it was after the build (runs and sweeps go to the run store).

    Where the README's build has just executed every chapter with today's code and inputs, the book is built
    here from those executions (a copy of its cache: nothing is executed again) and every page is checked as an
    executed one; the repository must then be as that build's executions found it. Where that build also rendered
    today's pages and finished with no warning (``executed.rendered_today``), its own pages are checked instead of
    rendering them again."""
    from matcomp.book.build.executed import BUILD_CACHE, build_wrote, rendered_today

    executed = build_executed
    assert widget_chapters() and set(widget_chapters()) <= set(executed), "no chapter imports matcomp.book.widgets"
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    html = None
    if built_with_todays_inputs(monkeypatch):
        executed = chapter_notebooks()
        for name in executed:
            assert build_wrote(ROOT / f"{name}.ipynb") == [], f"the build's execution of {name} wrote into the " \
                                                               f"repository: {build_wrote(ROOT / f'{name}.ipynb')}"
        if rendered_today(ROOT / "_build" / "html", ROOT):
            html = ROOT / "_build" / "html"  # the README's build's own pages: today's, with no warning
        else:
            shutil.copytree(BUILD_CACHE, tmp_path / "_build" / ".jupyter_cache")
    else:
        config["execute"]["exclude_patterns"] = [f"{name}.ipynb" for name in toc_files() if name not in executed]
    if html is None:
        html = built_here(config, tmp_path, executed)
    for name in toc_files():
        page = (html / f"{name}.html").read_text()
        assert "Traceback" not in page, f"{name} shows a traceback"
        assert "cdn.jsdelivr" not in page and "cdnjs" not in page, f"{name} loads a script from a CDN"
        assert ('class="cell_output' in page) == (name in executed), f"{name}: executed only if chosen above"
        assert "recorded for sweeps" not in page and "matcomp_result" not in page, f"{name} shows sweep records"
    assert "../mathjax/tex-svg.js" in (html / "book" / "task.html").read_text()
    for name in widget_chapters():
        text = (html / f"{name}.html").read_text()
        assert "application/vnd.jupyter.widget-state+json" in text, f"{name} holds no saved widget state"
        assert "../widgets/embed-amd.js" in text and "../widgets/require.js" in text, name
        # every control position's picture is saved, switched by links in the page: no kernel needed
        assert '"TabModel"' in text and '"LinkModel"' in text and text.count('"ImageModel"') >= 8, name
        assert len(text.encode()) < 5_000_000, f"{name} weighs {len(text.encode()):,} bytes"
    assert (html / "book" / "@jupyter-widgets" / "html-manager" / "dist" / "1551f4f60c37af51121f.woff2").is_file()
    if shutil.which("chromium") and importlib.util.find_spec("playwright"):  # .ci/run installs both
        check = subprocess.run([sys.executable, str(ROOT / "scripts" / "check_pages.py"), "--html", str(html)],
                               capture_output=True, text=True, timeout=900)
        assert check.returncode == 0, check.stdout[-5000:] + check.stderr[-2000:]
    rows = [re.findall(r"<p>(.*?)</p>", row) for row in re.findall(r"<tr[^>]*>(.*?)</tr>",
                                                                    (html / "book" / "status.html").read_text(), re.S)]
    timed = {cells[0]: cells for cells in rows if len(cells) == 3}
    for name in executed:  # the status page gives each chapter the build executed its time
        chapter = name.removeprefix("book/")
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", timed[chapter][1]), timed[chapter]
        assert float(timed[chapter][2]) > 0, timed[chapter]
    assert (html / "widgets" / "embed-amd.js").stat().st_size > 1_000_000


def built_here(config: dict, tmp_path: Path, executed: list[str]) -> Path:
    """The book built into ``tmp_path`` with ``config``, warnings as errors (but references to what an unexecuted
    page's cells make), the repository as it was after it; its HTML folder."""
    before = tree_state()
    (tmp_path / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))  # script order kept
    command = shutil.which("jupyter-book", path=Path(sys.executable).parent) or shutil.which("jupyter-book")
    result = subprocess.run([command, "build", "--keep-going", "--path-output", str(tmp_path), "--config",
                             str(tmp_path / "_config.yml"), str(ROOT)], capture_output=True, text=True, timeout=1800)
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-5000:]
    warnings = [w for w in re.findall(r"^.*WARNING: .*$", log, re.M) if not unexecuted_output_warning(w, executed)]
    assert not warnings, "\n".join(warnings)
    assert tree_state() == before, "the build wrote into the repository"
    return tmp_path / "_build" / "html"


def code_cell_lengths() -> list[int]:
    """The non-blank lines of every code cell of every chapter, sorted."""
    import nbformat

    cells = [c for p in sorted((ROOT / "book").glob("*.ipynb")) for c in nbformat.read(p, as_version=4).cells]
    return sorted(sum(1 for line in c.source.splitlines() if line.strip()) for c in cells if c.cell_type == "code")


def test_code_cells_are_short():
    """The chapters tell their story in prose and short cells; what is longer belongs in ``lib/``."""
    lengths = code_cell_lengths()
    median, p90 = lengths[len(lengths) // 2], lengths[int(0.9 * len(lengths))]
    assert median <= 5 and p90 <= 12, f"code cells: median {median}, 90th percentile {p90} non-blank lines"


def code_cells(path: Path) -> list[str]:
    import nbformat

    return [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


def test_the_chapters_are_the_toc_s_notebooks_in_its_order_each_with_its_module(tmp_path):
    import pkgutil

    from matcomp.book import chapters

    notebooks = [name.removeprefix("book/") for name in toc_files() if (ROOT / f"{name}.ipynb").exists()]
    assert list(chapters.CHAPTERS) == notebooks
    assert {module.name for module in pkgutil.iter_modules(chapters.__path__)} == set(chapters.CHAPTERS)
    (tmp_path / "book").mkdir()  # a book of its own: the toc's order, its page of prose left out
    for page, kind in (("b", ".ipynb"), ("a", ".ipynb"), ("notes", ".md")):
        (tmp_path / "book" / page).with_suffix(kind).write_text("{}")
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/b\nparts:\n  - caption: One\n    chapters:\n"
                                       "      - file: book/notes\n      - file: book/a\n")
    assert chapters.toc_chapters(tmp_path) == ("b", "a")


@pytest.mark.parametrize("chapter", sorted(p.stem for p in (ROOT / "book").glob("*.ipynb")))
def test_a_notebook_reaches_through_its_module_only_what_is_its_chapter_s_own(chapter):
    """A chapter's module holds what is that chapter's own; the notebook imports the rest from where it lives, so
    every ``chapter.<name>`` it reads is defined in ``matcomp.book.chapters.<chapter>`` (no re-exported name)."""
    import importlib

    module = importlib.import_module(f"matcomp.book.chapters.{chapter}")
    sources = code_cells(ROOT / "book" / f"{chapter}.ipynb")
    assert any(f"from matcomp.book.chapters import {chapter} as chapter" in source for source in sources)
    tree = ast.parse(inspect.getsource(module))
    own = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))} | {
        target.id for node in tree.body if isinstance(node, ast.Assign) for target in node.targets
        if isinstance(target, ast.Name)}
    reached = {name for source in sources for name in re.findall(r"\bchapter\.(\w+)", source)}
    assert "CHAPTER" in reached and reached <= own, f"{chapter} reaches {sorted(reached - own)} through its module"


@pytest.mark.parametrize("chapter", sorted(p.stem for p in (ROOT / "book").glob("*.ipynb")))
def test_a_chapter_opens_in_a_short_cell(chapter):
    """The cells up to the one that opens the chapter's runs (``setup``, else the first after the check of
    its parameters) are short: the opening lives in the chapter's module."""
    cells = code_cells(ROOT / "book" / f"{chapter}.ipynb")[1:]
    opening = next((i for i, source in enumerate(cells) if "chapter.setup(" in source), min(2, len(cells) - 1))
    for source in cells[:opening + 1]:
        statements = [node for node in ast.parse(source).body if not isinstance(node, (ast.Import, ast.ImportFrom))]
        lines = {line for node in statements for line in range(node.lineno, node.end_lineno + 1)}
        assert len(lines) < 8, f"{chapter}:\n{source}"
