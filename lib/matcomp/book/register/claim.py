"""One claim of the paper as the register holds it (``matcomp.book.register``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PaperClaim:
    """One claim of the paper: ``key`` (a short name), ``where`` (its section, figure or table), ``claim`` (one
    sentence, as the paper states it, every part of it; in quotation marks where it is the paper's own words),
    ``chapter`` (the notebook that tests it; None where none does), ``tested_by`` (the key numbers of that
    chapter's ladder that judge it), ``untested`` (why a part, or the whole, is not judged here) and
    ``from_code`` (those of ``tested_by`` that read a variant the authors' released code runs, not the experiment
    the text describes: attributed to the code wherever the paper's places are shown)."""

    key: str
    where: str
    claim: str
    chapter: str | None
    tested_by: tuple[str, ...] = ()
    untested: str = ""
    from_code: tuple[str, ...] = ()

    def places(self, key: str) -> str:
        """Where in the paper the key number ``key`` tests this claim, as the first page's table shows it: the
        NeurIPS places, and for a variant of the released code (``from_code``) that it is the code's.

        >>> claim = PaperClaim("k", "NeurIPS §3.2.2, App. F (WS §3.2.2)", "…", "attention_patching",
        ...                    ("all", "last"), from_code=("last",))
        >>> claim.places("all"), claim.places("last")
        ('NeurIPS §3.2.2, App. F', "NeurIPS §3.2.2, App. F: its number; the variant is the authors' released code's")
        """
        where = self.where.split(" (")[0]
        return f"{where}: its number; the variant is the authors' released code's" if key in self.from_code else where
