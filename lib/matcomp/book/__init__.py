"""What only the book needs: a chapter's opening (``chapter``), its figures (``plots``), tables
(``tables``), interactive explorers (``widgets``) and papermill sweeps over it (``sweep``).

May import every other layer of the package; nothing but ``matcomp.main`` imports it. Importing
``matcomp.book.sweep`` alone loads neither PyTorch nor ``transformers`` (a sweep's kernel starts fast).
"""
