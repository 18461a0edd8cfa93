"""What only the book needs, by job: the chapters' declarations (``spec``, ``parameters``, one module a chapter in
``chapters``) and openings (``chapter``, ``paper_model``); their presentation: figures (``plots``), tables
(``tables``), interactive explorers (``widgets``) and markup read alike in the book and in JupyterLab
(``markup``); judging the paper's claims (``judging``: the verdict rule, the size ladder, the register, the first
page's table); and the build's tooling (``build``: commands, plan, shipped tables, sweeps, Sphinx extensions).

May import every other layer of the package; nothing but ``matcomp.main`` imports it. Importing
``matcomp.book.build.sweep`` alone loads neither PyTorch nor ``transformers`` (a sweep's kernel starts fast).
"""
