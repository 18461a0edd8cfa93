"""A clean console on every page (a Sphinx extension, ``_config.yml``'s ``extra_extensions``): what the themes and
extensions of Jupyter Book 1 put in a page's head, mended where it logs errors a reader never sees.

- A script added to a page twice is kept once: sphinx-thebe adds its configuration (``const THEBE_JS_URL``) once
  when Sphinx starts reading and the builder adds it again, so every page threw "already been declared".
- A first visit (no stored theme mode) starts in "auto": sphinx-book-theme's head script sets the mode to the empty
  string, which pydata-sphinx-theme then rejects with a console error.

The widget manager's call to MathJax 2 is bridged by ``static/widgets/mathjax-bridge.js`` (loaded with it), and
its fonts are served where it looks for them (``static/book/@jupyter-widgets``; ``static/README.md``).
"""

from __future__ import annotations

THEME_MODE = 'if (!document.documentElement.dataset.mode) { document.documentElement.dataset.mode = "auto"; }'


def unique_scripts(app, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Keep the first of each script a page's head holds more than once (same file, same inline body; an inline
    script's file is None or "", by who added it)."""
    scripts, seen = context.get("script_files", []), set()
    kept = []
    for script in scripts:
        key = (getattr(script, "filename", script) or "", tuple(sorted(getattr(script, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            kept.append(script)
    scripts[:] = kept


def setup(app) -> dict:
    app.add_js_file(None, body=THEME_MODE, priority=100)
    app.connect("html-page-context", unique_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
