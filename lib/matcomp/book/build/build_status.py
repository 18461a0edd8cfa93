"""The book's status page (a Sphinx extension, ``_config.yml``'s ``extra_extensions``): the ``build-status``
directive writes, when the page is read, how long each chapter took in its latest execution (the build's
jupyter-cache, ``matcomp.book.build.executed.executions``), the machine that built the book and the versions it ran
with, as QuantEcon's lectures do. The page is read again in every build (``env-get-outdated``), so it always
says what the build just used."""

from __future__ import annotations

import os
import platform
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

from matcomp.book.build.executed import PACKAGES, executions
from matcomp.book.chapters import CHAPTERS
from matcomp.limits import ram_bytes
from matcomp.presets import preset_name

BOOK_PACKAGES = ("jupyter-book", "myst-nb", "sphinx", "ipywidgets")  # what builds and shows the pages


def chapter_rows(cache_path: Path | str) -> list[list[str]]:
    """One row per chapter, in the book's order: its name, when its latest execution was cached and its seconds
    (blank where the cache holds none)."""
    found = executions(cache_path)
    rows = []
    for chapter in CHAPTERS:
        run = found.get(f"{chapter}.ipynb")
        seconds = "" if run is None or run.seconds is None else f"{run.seconds:.1f}"
        rows.append([chapter, "" if run is None else run.created[:19].replace("T", " "), seconds])
    return rows


def machine_rows() -> list[list[str]]:
    """The machine and settings the build ran with: processor, cores, memory, system, Python and the preset."""
    model = next((line.split(":", 1)[1].strip() for line in _cpuinfo() if line.startswith("model name")),
                 platform.processor() or platform.machine())
    return [["processor", model], ["cores", str(os.cpu_count())], ["memory", f"{ram_bytes() / 2 ** 30:.0f} GiB"],
            ["system", platform.platform()], ["Python", platform.python_version()], ["preset", preset_name()]]


def version_rows() -> list[list[str]]:
    """The version of each package that computes or builds the pages."""
    rows = []
    for package in (*PACKAGES, *BOOK_PACKAGES):
        try:
            rows.append([package, version(package)])
        except PackageNotFoundError:
            rows.append([package, "not installed"])
    return rows


def _cpuinfo() -> list[str]:
    path = Path("/proc/cpuinfo")
    return path.read_text().splitlines() if path.exists() else []


def table(header: list[str], rows: list[list[str]]) -> nodes.table:
    """A docutils table of text cells."""
    group = nodes.tgroup(cols=len(header))
    group += [nodes.colspec(colwidth=1) for _ in header]

    def row(cells: list[str]) -> nodes.row:
        made = nodes.row()
        made += [nodes.entry("", nodes.paragraph(text=cell)) for cell in cells]
        return made

    head, body = nodes.thead(), nodes.tbody()
    head += row(header)
    body += [row(cells) for cells in rows]
    group += [head, body]
    return nodes.table("", group)


class BuildStatus(SphinxDirective):
    """``build-status``: the chapters' execution times, the machine and the versions, as three tables."""

    def run(self) -> list[nodes.Node]:
        _pages(self.env).add(self.env.docname)
        cache = Path(self.env.srcdir) / getattr(self.env, "mystnb_config").execution_cache_path  # MyST-NB sets it
        return [table(["chapter", "latest execution (UTC)", "seconds"], chapter_rows(cache)),
                table(["machine", ""], machine_rows()), table(["package", "version"], version_rows())]


def _pages(env) -> set[str]:
    """The pages that hold the directive, kept in the build environment."""
    if not hasattr(env, "build_status_pages"):
        env.build_status_pages = set()
    return env.build_status_pages


def always_read(app, env, added, changed, removed) -> list[str]:
    """The pages holding the directive: read again in every build, so that they say what it just used."""
    return sorted(_pages(env) - set(removed))


def purge(app, env, docname: str) -> None:
    _pages(env).discard(docname)


def merge(app, env, docnames, other) -> None:
    """A page read in a parallel reader's environment: kept in the main one."""
    _pages(env).update(_pages(other) & set(docnames))


def setup(app) -> dict:
    app.add_directive("build-status", BuildStatus)
    app.connect("env-get-outdated", always_read)
    app.connect("env-purge-doc", purge)
    app.connect("env-merge-info", merge)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
