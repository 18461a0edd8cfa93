"""One claim of the paper as the register holds it (``matcomp.book.judging.register``)."""

from __future__ import annotations

from dataclasses import dataclass

from matcomp.book.spec import KeyNumber


@dataclass(frozen=True)
class PaperClaim:
    """One claim of the paper: ``key`` (a short name, which the key numbers that judge it name in their
    ``KeyNumber.tests``), ``where`` (its section, figure or table), ``claim`` (one sentence, as the paper states
    it, every part of it; in quotation marks where it is the paper's own words), ``chapter`` (the notebook that
    tests it; None where none does) and ``untested`` (why a part, or the whole, is not judged here)."""

    key: str
    where: str
    claim: str
    chapter: str | None
    untested: str = ""

    def places(self, number: KeyNumber) -> str:
        """Where in the paper the key number ``number`` tests this claim, as the first page's table shows it: the
        NeurIPS places, and for a variant of the released code (``KeyNumber.from_code``) that it is the code's.

        >>> from matcomp.book.judging.verdicts import Claim
        >>> claim = PaperClaim("k", "NeurIPS §3.2.2, App. F (WS §3.2.2)", "…", "attention_patching")
        >>> claim.places(KeyNumber("all", "all", Claim(1.0))), claim.places(KeyNumber("last", "last", Claim(1.0),
        ...                                                                          from_code=True))
        ('NeurIPS §3.2.2, App. F', "NeurIPS §3.2.2, App. F: its number; the variant is the authors' released code's")
        """
        where = self.where.split(" (")[0]
        return f"{where}: its number; the variant is the authors' released code's" if number.from_code else where
