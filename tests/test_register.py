"""The register of the paper's claims (``matcomp.book.judging.register``): every claim names a chapter of the book and
key numbers that chapter judges, and every number a chapter judges answers a claim of it."""

import re
from pathlib import Path

import pytest

from matcomp.book.chapters import chapter_specs
from matcomp.book.judging.ladder import DEPTH
from matcomp.book.judging.register import REGISTER, judged_by, tally, the_shift, training_and_beyond

TOC = Path(__file__).resolve().parents[1] / "_toc.yml"
BOOK = TOC.parent / "book"
DECLARED = {chapter.name: chapter.key_numbers.numbers for chapter in chapter_specs() if chapter.key_numbers}
CHECKS = {chapter: {number.id for number in numbers if number.check} for chapter, numbers in DECLARED.items()}


def ids(claim) -> set[str]:
    return {number.id for number in judged_by(claim)}


def test_every_claim_names_a_chapter_of_the_book_and_numbers_it_judges():
    chapters = set(re.findall(r"file: book/(\w+)", TOC.read_text()))
    assert len({claim.key for claim in REGISTER}) == len(REGISTER)  # one entry a claim
    for claim in REGISTER:
        assert claim.chapter is None or claim.chapter in chapters, claim.key
        assert judged_by(claim) or claim.untested, f"{claim.key}: neither judged nor said why not"


def test_every_number_a_chapter_judges_answers_a_claim_of_that_chapter_in_the_register():
    by_key = {claim.key: claim for claim in REGISTER}
    for chapter, numbers in DECLARED.items():
        for number in numbers:
            assert number.tests, f"{chapter}: {number.id} judges no claim of the register"
            for key in number.tests:  # a claim it names exists, and is its chapter's
                assert key in by_key and by_key[key].chapter == chapter, (chapter, number.id, key)
    assert DEPTH in DECLARED["sudden_drop"] and DEPTH.id in ids(by_key["bert_solves_lrmc"])


def test_a_claim_judged_in_part_by_a_check_of_the_method_says_what_is_not_judged():
    partly = {claim.key: claim for claim in REGISTER if ids(claim) & CHECKS.get(claim.chapter or "", set())}
    assert {"plateau_level", "patching_steers_missing", "position_clusters_after_drop"} <= set(partly)
    for key, claim in partly.items():
        assert "check" in claim.untested, key


def test_a_number_read_on_a_variant_of_the_released_code_is_attributed_to_the_code_not_the_text():
    code = {(claim.key, number.id): claim.places(number) for claim in REGISTER for number in judged_by(claim)
            if number.from_code}
    variant = "NeurIPS §3.2.2, App. F: its number; the variant is the authors' released code's"
    assert code == {("patching_steers_missing", "restored_last"): variant,
                    ("patching_steers_missing", "patched_last_over_clean"): variant}


def test_the_register_holds_every_claim_found_in_the_paper_and_says_where_the_workshop_version_alone_has_it():
    assert tally()["claims"] == len(REGISTER) >= 70  # 70 claims found in the two versions of the paper
    assert tally()["no chapter"] == sum(claim.chapter is None for claim in REGISTER) == 7
    added = {"compute_resources", "twelve_layer_recipe", "uniform_ablation_caveat", "gpt_could_match_bert",
             "pre_shift_copies_without_attention_or_positions", "novelty_interpretability",
             "online_setting_distinct", "implicit_optimisation_open"}
    by_key = {claim.key: claim for claim in REGISTER}
    assert added <= set(by_key)
    for claim in REGISTER:  # a place outside the NeurIPS text says so, in words a reader can follow
        assert claim.where.startswith("NeurIPS") or "workshop version alone" in claim.where, claim.key
    assert by_key["twelve_layer_recipe"].where.startswith("WS App. B")
    assert "not in the workshop version" in by_key["plateau_length_not_suddenness"].where  # WS App. K has neither
    assert by_key["drop_driven_by_lmask"].where.startswith("NeurIPS §3.1")  # not the workshop's alone
    # a claim not tested here says so: by no chapter, or by none of its key numbers
    for claim in REGISTER:
        if claim.chapter is None:
            assert not judged_by(claim) and claim.untested, claim.key


def test_a_claim_judged_in_part_says_which_part_is_not():
    by_key = {claim.key: claim for claim in REGISTER}
    assert "sharpness" in by_key["plateau_then_sudden_drop"].untested and "(ours)" in \
        by_key["plateau_then_sudden_drop"].untested  # the paper gives no number: the bound is the book's
    assert "4e-3 is not judged" in by_key["bert_solves_lrmc"].untested  # only through a ratio derived from it
    assert "released scripts" in by_key["patching_steers_missing"].untested  # the last layer is the code's
    assert "(ours)" in by_key["identity_heads_last_layer"].untested  # "every one in the last layer" is our reading
    for key, figure in (("masked_row_heads", "Fig. 5"), ("longest_contiguous_column_heads", "Fig. 24")):
        assert figure in by_key[key].untested and "is not judged" in by_key[key].untested, key
    positions = by_key["pre_shift_copies_without_attention_or_positions"]
    assert ids(positions) == {"uniform_pre_obs"} and "positional" in positions.untested


def test_the_register_goes_through_the_paper_in_order_of_its_sections():
    places = [claim.where for claim in REGISTER]
    assert any("App. B" in where for where in places) and any("App. J" in where for where in places)
    assert places[0].startswith("NeurIPS Abstract")
    assert places[-1] == "NeurIPS §6"  # the conclusion's statement of scope closes it


def test_each_module_of_the_register_stays_short():
    for module in (the_shift, training_and_beyond):
        assert len(Path(module.__file__).read_text().splitlines()) < 400, module.__name__


def test_every_chapter_quotes_the_registers_claims_it_tests_under_its_first_paragraph():
    import json

    from matcomp.book.judging.register import claims_text

    for spec in chapter_specs():
        if spec.name == "intro":
            continue
        mine = [claim for claim in REGISTER if claim.chapter == spec.name]
        text = claims_text(spec.name).data
        assert text.count("\n- ") + 1 == len(mine) >= 1, spec.name  # one bullet a claim, every one of its claims
        assert all(claim.claim in text and claim.where in text for claim in mine), spec.name
        cells = json.loads((BOOK / f"{spec.name}.ipynb").read_text())["cells"]
        assert "{eval}`page_claims`" in "".join(cells[0]["source"]), spec.name  # under the page's first paragraph
        assert any("quote_claims(chapter.CHAPTER)" in "".join(c["source"]) for c in cells if c["cell_type"] == "code")
    with pytest.raises(ValueError, match="holds no claim that the intro chapter tests"):
        claims_text("intro")
