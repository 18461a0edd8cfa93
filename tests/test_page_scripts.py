"""A page's head holds each script once (the built pages' console is checked in a browser: tests/test_book.py)."""

from sphinx.builders.html._assets import _JavaScript

from matcomp.book.build.page_scripts import unique_scripts


def test_a_script_added_twice_is_kept_once_and_the_order_is_kept():
    thebe = 'const THEBE_JS_URL = "https://unpkg.com/thebe@0.8.2/lib/index.js"'
    scripts = [_JavaScript("doctools.js"), _JavaScript(None, body=thebe), _JavaScript("sphinx-thebe.js", **{
        "async": "async"}), _JavaScript(None, body="var x = 1"), _JavaScript("", body=thebe),
        _JavaScript("doctools.js"), _JavaScript("sphinx-thebe.js")]
    context = {"script_files": scripts}
    unique_scripts(None, "book/task", "page.html", context, None)
    assert [(s.filename, s.attributes) for s in context["script_files"]] == [
        ("doctools.js", {}), (None, {"body": thebe}), ("sphinx-thebe.js", {"async": "async"}),
        (None, {"body": "var x = 1"}), ("sphinx-thebe.js", {})]  # the same file with other attributes is another

