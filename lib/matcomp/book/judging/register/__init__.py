"""The register of the paper's claims: every claim Gopalani, Lubana & Hu make (NeurIPS 2024), section by section and
appendix by appendix, with the chapter that tests it, or why none does; the key numbers that judge a claim name it
(``KeyNumber.tests``), and ``judged_by`` finds them. The book's first page lists it, and its verdict table is
generated from it (``summary.verdict_table``), so a judged number cannot be left out of the table, nor a claim out
of sight. A place is the NeurIPS paper's; where the workshop version ("WS", *How Do Transformers Fill in the
Blanks?*) places or numbers it otherwise, its place follows in brackets, and a claim it alone makes says "the
workshop version alone".

The claims are hand-kept tuples in two modules by the paper's sections (``the_shift``: the abstract to §3.2;
``training_and_beyond``: §3.3 to §6 and the appendices), so that neither grows past a module's length; ``REGISTER``
joins them in the paper's order, and ``summary`` reads it.
"""

from __future__ import annotations

from IPython.display import Markdown

from matcomp.book.chapters import chapter_spec
from matcomp.book.judging.register import the_shift, training_and_beyond
from matcomp.book.judging.register.claim import PaperClaim
from matcomp.book.markup import glue_quoted
from matcomp.book.spec import ChapterSpec, KeyNumber

REGISTER: tuple[PaperClaim, ...] = the_shift.CLAIMS + training_and_beyond.CLAIMS


def judged_by(claim: PaperClaim) -> tuple[KeyNumber, ...]:
    """The key numbers that judge ``claim``: those of its chapter whose ``KeyNumber.tests`` name it, in the order
    the chapter declares them (the link is written once, on the key number)."""
    spec = None if claim.chapter is None else chapter_spec(claim.chapter).key_numbers
    return () if spec is None else tuple(number for number in spec.numbers if claim.key in number.tests)


def judged_text(claim: PaperClaim) -> str:
    """How the book judges ``claim``: the labels of the key numbers that judge it, then why a part, or the whole,
    is not judged here ("not judged: …" where the reason does not say so itself)."""
    numbers = "; ".join(number.label for number in judged_by(claim))
    untested = claim.untested
    if untested and "judged" not in untested:
        untested = f"not judged: {untested}"
    return "; ".join(filter(None, (numbers, untested)))


def tally() -> dict[str, int]:
    """How the register's claims are tested, for the first page's sentence on it: all of them, those that key
    numbers judge (in whole or in part), those a chapter shows without a key number, and those no chapter tests.

    >>> counts = tally()
    >>> counts["claims"] == counts["judged"] + counts["shown"] + counts["no chapter"]
    True
    """
    judged = sum(bool(judged_by(claim)) for claim in REGISTER)
    untested = sum(claim.chapter is None for claim in REGISTER)
    return {"claims": len(REGISTER), "judged": judged, "shown": len(REGISTER) - judged - untested,
            "no chapter": untested}


def claims_text(chapter: str) -> Markdown:
    """The register's claims that ``chapter`` tests, as its page quotes them under its first paragraph: each
    claim's place in the paper, its sentence as the register holds it, and the key numbers that judge it (or that
    the page shows it without one), so a claim's wording lives in the register alone.

    >>> print(claims_text("attention_patching").data[:62])
    - *NeurIPS §3.2.2, App. F (WS §3.2.2, App. J)*: Patching every
    """
    lines = [f"- *{claim.where}*: {claim.claim} ({judged_text(claim) or 'shown, not judged'})"
             for claim in REGISTER if claim.chapter == chapter]
    if not lines:
        raise ValueError(f"the register holds no claim that the {chapter} chapter tests")
    return Markdown("\n".join(lines))


def quote_claims(chapter: ChapterSpec) -> None:
    """Glue ``claims_text`` of ``chapter`` as ``page_claims``, for its page's first paragraph (``{eval}``)."""
    glue_quoted({"page_claims": claims_text(chapter.name)})
