"""The book's one verdict rule (``matcomp.book.verdicts``) on per-seed numbers, and the first page's table of every
verdict (``matcomp.book.summary``), read from the shipped runs as the chapters read them."""

import pytest

from matcomp.analysis.key_numbers import FINDINGS, Side
from matcomp.book.summary import categories_table, chapter_ladders, linked, verdict_table
from matcomp.book.verdicts import CATEGORIES, Claim, verdict


def test_a_finding_that_holds_on_one_of_three_seeds_does_not_reproduce():
    claim = Claim(15000.0)
    assert verdict({0: 15000.0, 1: 16000.0, 2: 14000.0}, claim).category == "reproduces"
    one_of_three = verdict({0: 15000.0, 1: 5000.0, 2: 60000.0}, claim)
    assert one_of_three.category == "mixed" and one_of_three.count("matches") == 1
    assert str(one_of_three) == "mixed: as the paper on 1 of 3 seeds, neither on 2"
    assert verdict({0: 5000.0, 1: 60000.0}, claim).category == "does not"


def test_one_seed_is_consistent_with_the_paper_never_a_reproduction():
    assert verdict({0: 15783.0}, Claim(15000.0)).category == "consistent with"
    assert verdict({0: 15783.0, 1: float("nan")}, Claim(15000.0), {1: "no drop"}).category == "consistent with"


def test_a_seed_that_cannot_be_read_is_counted_not_dropped():
    v = verdict({0: 2.0, 3: 2.1}, Claim(2.0), {1: "no drop in 60,000 steps", 2: "no drop in 60,000 steps"})
    assert v.category == "reproduces" and len(v.marks) == 4  # judged on the two read, counted over the four trained
    assert str(v).endswith("2 cannot be read (seeds 1, 2: no drop in 60,000 steps)")
    assert verdict({}, Claim(2.0), {0: "no drop"}).category == "cannot be read"


def test_the_effect_without_its_size_is_direction_only_and_a_mean_is_never_judged():
    claim = Claim(17.0, reference=1.0)  # a depth: 1 is no drop at all
    assert verdict({0: 4.3, 1: 5.0}, claim).category == "direction only"
    # a mean of 11.1 would be 0.43 from 17 in log ratio; the seeds are judged, not their mean: 23.9 is within 0.35
    assert verdict({0: 23.9, 1: 4.3, 2: 5.0}, claim).marks == {0: "direction only", 1: "direction only",
                                                                 2: "direction only"}
    assert verdict({0: 4.3, 1: 0.5}, claim).category == "mixed"  # one with the effect, one against it
    assert verdict({0: 0.0}, Claim(Side(1))).category == "does not"


def test_the_categories_are_defined_once_and_the_rule_gives_only_them():
    assert categories_table().index.tolist() == list(CATEGORIES)
    seen = {verdict(values, Claim(2.0, 1.0), unread).category for values, unread in [
        ({0: 2.0, 1: 2.0}, None), ({0: 2.0}, None), ({0: 3.0}, None), ({0: 2.0, 1: 0.5}, None), ({0: 0.5}, None),
        ({}, {0: "no drop"})]}
    assert seen == set(CATEGORIES)


@pytest.fixture(scope="module")
def table():
    return verdict_table(chapter_ladders("cpu"))


def test_the_first_pages_table_holds_every_judged_key_number_and_no_check_of_the_method(table):
    chapters = table.index.get_level_values("chapter")
    assert list(dict.fromkeys(chapters)) == ["sudden_drop", *FINDINGS]
    assert ("attention_patching", "restored, all layers") not in table.index  # holds by construction
    assert ("attention_patching", "restored, last layer") in table.index
    assert ("copying_phase", "× below the plateau") not in table.index  # judged once, on the sudden drop's row
    seven = table["7×7 (cpu7x7), 7 seeds"]
    assert seven.loc[("sudden_drop", "drop step")] == "mixed (2 of 7)"  # 12,542 and 15,305; 8,946 and four without
    copying = seven.loc[("copying_phase", "uniform attention, pre-shift: L_obs ×")]
    assert copying == "reproduces (3 of 7; 4 cannot be read)"  # every seed read: 0, 3 and 6
    assert seven.loc[("attention_patching", "restored, last layer")] == "does not (0 of 7; 4 cannot be read)"
    paper = [c for c in table.columns if "paper scale" in c or "rank 2" in c]
    # the paper's model (seed 0, shipped with its checkpoints): its drop at 22,973 is not the paper's ~15,000,
    # and every finding is read on it, so no row of its column is empty
    assert table.loc[("sudden_drop", "drop step"), paper[0]] == "does not (0 of 1)"
    assert "—" not in set(table[paper[0]]) and table[paper[0]].str.endswith("of 1)").all()
    assert '<a href="sudden_drop.html">The sudden drop</a>' in linked(table).index.get_level_values(0)
