"""The register of the paper's claims (``matcomp.book.register``): every claim names a chapter of the book and
key numbers that chapter judges, and every number a chapter judges answers a claim of it."""

import re
from pathlib import Path

from matcomp.book.chapters import chapter_specs
from matcomp.book.ladder import DEPTH, drop_claims
from matcomp.book.register import REGISTER

TOC = Path(__file__).resolve().parents[1] / "_toc.yml"
JUDGED = {"sudden_drop": set(drop_claims()),
          **{chapter.name: set(chapter.key_numbers.claims) for chapter in chapter_specs() if chapter.key_numbers}}


def test_every_claim_names_a_chapter_of_the_book_and_numbers_it_judges():
    chapters = set(re.findall(r"file: book/(\w+)", TOC.read_text()))
    assert len({claim.key for claim in REGISTER}) == len(REGISTER)  # one entry a claim
    for claim in REGISTER:
        assert claim.chapter is None or claim.chapter in chapters, claim.key
        assert set(claim.tested_by) <= JUDGED.get(claim.chapter or "", set()), claim.key
        assert claim.tested_by or claim.untested, f"{claim.key}: neither judged nor said why not"


def test_every_number_a_chapter_judges_answers_a_claim_of_the_register():
    named = {(claim.chapter, key) for claim in REGISTER for key in claim.tested_by}
    judged = {(chapter, key) for chapter, keys in JUDGED.items() for key in keys}
    assert judged - named == set()
    assert DEPTH in {key for claim in REGISTER if claim.chapter == "sudden_drop" for key in claim.tested_by}


def test_the_register_goes_through_the_paper_in_order_of_its_sections():
    places = [claim.where for claim in REGISTER]
    assert any("App. B" in where for where in places) and any("App. J" in where for where in places)
    assert places[0].startswith("NeurIPS Abstract")
