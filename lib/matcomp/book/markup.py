"""The chapters' markup, read alike in the built book and in JupyterLab (``jupyterlab-myst``): a chapter opened
and run in JupyterLab shows what its page shows, with no raw role. Two kinds need care.

**Values the prose quotes.** A sentence quotes a computed value as ``{eval}`name```, a role both readers know:

- in **JupyterLab** (``jupyterlab-myst``), running a markdown cell evaluates ``name`` in the kernel; "Run All"
  asks once every code cell has run, so the verdicts at the top of a page read values computed below them;
- in the **built book**, which reads the cached executions and has no kernel to ask, the ``eval`` role of this
  Sphinx extension (``_config.yml``'s ``extra_extensions``) reads the value the chapter glued under that name.

``glue_quoted`` does both halves in the kernel: it glues each value (myst-nb ``glue``, not displayed) and binds it
as a name of the notebook's namespace. Text is bound as ``Text``, whose ``repr`` is the text itself, so JupyterLab
shows ``25``, not ``'25'``; a ``Markdown`` value (a list of verdicts) stays markdown and is rendered as blocks in
both. A name is never bound over a variable of the chapter's own.

**References to a figure** are written ``[figure](#fig-name)``, a link JupyterLab shows as "figure" (it cannot
number a figure a code cell draws: ``{numref}`` reads "figure {number}" there); the book turns each such link into
the numbered reference ``{numref}`figure {number} <fig-name>``` would make ("figure 3").
"""

from __future__ import annotations

import keyword

from IPython.display import Markdown

EVAL_CLASS = "quoted-markdown"  # a markdown value's block, lifted out of the paragraph its role sat in
FIGURE_LINK = "figure"  # a link with this text to a label starting "fig-" is numbered in the book


class Text(str):
    """A quoted text: a ``str`` whose ``repr`` is itself, as the sentence shows it."""

    def __repr__(self) -> str:
        return str(self)


def glue_quoted(values: dict[str, object]) -> None:
    """Glue each value under its name for the book and bind it in the notebook's namespace for JupyterLab:
    a ``Markdown`` value as it is, any other as ``Text(str(value))``. A name that is not a Python identifier, or
    that would replace a variable the chapter defined itself, is a ValueError naming it."""
    from IPython import get_ipython
    from myst_nb import glue

    quoted = {name: value if isinstance(value, Markdown) else Text(value) for name, value in values.items()}
    for name in quoted:
        if not name.isidentifier() or keyword.iskeyword(name):
            raise ValueError(f"a quoted value's name must be a Python name, for {{eval}}`name` to evaluate it; "
                             f"got {name!r}")
    shell = get_ipython()
    namespace = shell.user_ns if shell is not None else {}
    for name, value in quoted.items():
        if name in namespace and not isinstance(namespace[name], (Text, Markdown)):
            raise ValueError(f"quoting {name!r} would replace the chapter's own variable {name} "
                             f"({type(namespace[name]).__name__}); quote it under another name")
        glue(name, value, display=False)
        namespace[name] = value


# ---- the book's side: a Sphinx extension ----

def setup(app) -> dict:
    from docutils import nodes
    from myst_nb.core.render import MimeData
    from myst_nb.core.variables import RetrievalError
    from myst_nb.ext.glue.utils import retrieve_glue_data
    from myst_nb.ext.utils import RoleBase
    from sphinx.transforms import SphinxTransform

    class QuotedRole(RoleBase):
        """``{eval}`name```: the value the chapter glued under ``name`` (``glue_quoted``): its text inline, or its
        markdown as blocks."""

        def run(self):
            name = self.text.strip()
            if not name.isidentifier():
                return [], [self.warning(f"the book reads {{eval}} of a name a chapter quoted (glue_quoted); "
                                         f"{name!r} is not a name")]
            try:
                result = retrieve_glue_data(self.document, name)
            except RetrievalError as err:
                return [], [self.warning(f"{{eval}}`{name}`: {err} (is it quoted by glue_quoted?)")]
            data = result.data
            if "text/markdown" in data:
                key = result.nb_renderer.config.cell_metadata_key
                mime = MimeData("text/markdown", data["text/markdown"], output_metadata=result.metadata,
                                cell_metadata={key: {"markdown_format": "myst"}}, line=self.line)
                block = nodes.container(classes=[EVAL_CLASS])
                block += result.nb_renderer.render_markdown(mime)
                return [block], []
            text = data.get("text/plain", "")
            node = nodes.inline(text, text, classes=["pasted-text"])  # as {glue:text} wrote it: the pages unchanged
            self.set_source_info(node)
            return [node], []

        def warning(self, message: str):
            from myst_nb.core.variables import create_warning

            return create_warning(message, self.document, self.line, "eval")

    class LiftMarkdown(SphinxTransform):
        """A paragraph holding only a markdown value's block becomes that block (no ``<div>`` inside a ``<p>``)."""

        default_priority = 200

        def apply(self, **kwargs) -> None:
            for block in list(self.document.findall(nodes.container)):
                paragraph = block.parent
                if EVAL_CLASS in block["classes"] and isinstance(paragraph, nodes.paragraph) and \
                        not paragraph.astext().replace(block.astext(), "").strip():
                    paragraph.replace_self(block.children)

    def number_figure_links(app, doctree) -> None:
        """Each ``[figure](#fig-name)`` link becomes the pending ``numref`` reference Sphinx numbers."""
        from sphinx.addnodes import pending_xref

        for link in list(doctree.findall(nodes.reference)):
            target = link.get("refid", "")
            if link.get("id_link") and target.startswith("fig-") and link.astext() == FIGURE_LINK:
                xref = pending_xref("", refdomain="std", reftype="numref", refexplicit=True, refwarn=True,
                                    reftarget=target, refdoc=app.env.docname)
                xref += nodes.inline(f"{FIGURE_LINK} {{number}}", f"{FIGURE_LINK} {{number}}",
                                     classes=["xref", "std", "std-numref"])
                link.replace_self(xref)

    app.add_role("eval", QuotedRole(), override=True)
    app.add_transform(LiftMarkdown)
    app.connect("doctree-read", number_figure_links)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
