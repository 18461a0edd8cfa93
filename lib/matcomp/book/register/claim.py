"""One claim of the paper as the register holds it (``matcomp.book.register``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PaperClaim:
    """One claim of the paper: ``key`` (a short name), ``where`` (its section, figure or table), ``claim`` (one
    sentence, as the paper states it, every part of it; in quotation marks where it is the paper's own words),
    ``chapter`` (the notebook that tests it; None where none does), ``tested_by`` (the key numbers of that
    chapter's ladder that judge it) and ``untested`` (why a part, or the whole, is not judged here)."""

    key: str
    where: str
    claim: str
    chapter: str | None
    tested_by: tuple[str, ...] = ()
    untested: str = ""
