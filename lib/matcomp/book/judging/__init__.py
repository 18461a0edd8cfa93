"""Judging the paper's claims: the one verdict rule (``verdicts``), a finding read up the size ladder and judged
seed by seed (``ladder``, read from runs by ``ladder_readings``), the register of the paper's claims
(``register``) and the first page's table of every verdict (``summary``). It reads the chapters' declarations
(``matcomp.book.spec``, ``matcomp.book.chapters``) and names no chapter.
"""
