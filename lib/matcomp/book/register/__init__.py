"""The register of the paper's claims: every claim Gopalani, Lubana & Hu make (NeurIPS 2024), section by
section and appendix by appendix, with the chapter that tests it and the key numbers that judge it, or why none
does. The book's first page lists it, and its verdict table is generated from it (``summary.verdict_table``),
so a judged number cannot be left out of the table, nor a claim out of sight. A place is the NeurIPS paper's;
where the workshop version ("WS", *How Do Transformers Fill in the Blanks?*) places or numbers it otherwise,
its place follows in brackets, and a claim it alone makes says "the workshop version alone".

The claims are hand-kept tuples in two modules by the paper's sections (``the_shift``: the abstract to §3.2;
``training_and_beyond``: §3.3 to §6 and the appendices), so that neither grows past a module's length;
``REGISTER`` joins them in the paper's order, and ``summary`` reads it.
"""

from __future__ import annotations

from matcomp.book.register import the_shift, training_and_beyond
from matcomp.book.register.claim import PaperClaim

REGISTER: tuple[PaperClaim, ...] = the_shift.CLAIMS + training_and_beyond.CLAIMS


def tally() -> dict[str, int]:
    """How the register's claims are tested, for the first page's sentence on it: all of them, those that key
    numbers judge (in whole or in part), those a chapter shows without a key number, and those no chapter tests.

    >>> counts = tally()
    >>> counts["claims"] == counts["judged"] + counts["shown"] + counts["no chapter"]
    True
    """
    judged = sum(bool(claim.tested_by) for claim in REGISTER)
    untested = sum(claim.chapter is None for claim in REGISTER)
    return {"claims": len(REGISTER), "judged": judged, "shown": len(REGISTER) - judged - untested,
            "no chapter": untested}
