"""The book's one verdict rule (``matcomp.book.judging.verdicts``) on per-seed numbers, and the first page's table of
every verdict (``matcomp.book.judging.summary``), read from the shipped runs as the chapters read them."""

import pytest

from matcomp.book.chapters import chapter_specs
from matcomp.book.judging.ladder import OWN_RECIPE
from matcomp.book.judging.register import REGISTER, judged_by
from matcomp.book.judging.summary import categories_table, chapter_ladders, linked, unregistered, verdict_table
from matcomp.book.judging.verdicts import CATEGORIES, CHECK, FALLS, GROWS, Claim, verdict
from matcomp.paper import Side


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


def test_a_seed_within_two_standard_errors_of_no_effect_cannot_tell():
    """The nuclear-norm seed of the last reading: BERT / NN 0.915 is 0.6 standard errors from 1, the value without
    the effect, so it cannot tell; the same number estimated ten times better is as the paper."""
    claim = Claim(Side(1, above=False, strict=True))
    assert verdict({0: 0.915}, claim, errors={0: 0.14}).category == "cannot tell"
    assert verdict({0: 0.915}, claim, errors={0: 0.014}).category == "consistent with"
    assert verdict({0: 0.915}, claim).category == "consistent with"  # a number given without its error: as it is
    mixed = verdict({0: 0.915, 3: 0.5, 6: 1.3}, claim, errors={0: 0.14, 3: 0.1, 6: 0.1})
    assert mixed.marks == {0: "cannot tell", 3: "matches", 6: "against"} and mixed.category == "mixed"
    assert str(mixed) == "mixed: as the paper on 1 of 3 seeds, within noise on 1, neither on 1"
    assert verdict({0: 0.915, 6: 1.3}, claim, errors={0: 0.14, 6: 0.1}).category == "does not"  # none for it
    # noise is judged against the value without the effect, never against the paper's own number
    assert Claim(2.6, reference=1.0).mark(2.0, se=0.4) == "direction only"  # 2.5 s.e. above 1
    assert Claim(2.6, reference=1.0).mark(1.5, se=0.4) == "cannot tell"  # 1.25 s.e. above 1
    assert Claim(1.004).mark(1.3, se=0.01) == "against"  # a claim of no effect has no reference to hide in


def test_a_run_a_clock_stopped_is_judged_as_far_as_it_was_trained():
    """The paper's model, stopped by a clock at step 29,000 of 50,000: its numbers that training still moves, short
    of the paper's that way, cannot tell yet, never "does not"; one already as the paper's counts; the same numbers
    on a run that trained its budget, or one the book's rule stopped after its drop, are judged as they are."""
    at = "stopped at step 29,000 of 50,000 (6.53× below its plateau)"
    depth, share = Claim(16.8, 2.0, training=GROWS), Claim(1.0, ours=True, training=GROWS)
    probe = Claim(Side(0.5, above=False), ours=True, training=FALLS)
    for claim, value in ((depth, 6.53), (share, 0.273), (Claim(3.03, 1.0, training=GROWS), 1.20), (probe, 0.633)):
        stopped = verdict({"paper": value}, claim, stopped={"paper": at})
        assert stopped.marks == {"paper": "stopped short"} and stopped.category == "cannot tell"
        assert str(stopped) == stopped.brief() == f"cannot tell: {at}"
        assert verdict({"paper": value}, claim).category in ("direction only", "does not")  # finished: as it is
    assert verdict({"paper": 0.84}, Claim(Side(1, above=False, strict=True), training=FALLS),
                   stopped={"paper": at}).category == "consistent with"  # already as the paper's
    assert verdict({"paper": 30.0}, depth, stopped={"paper": at}).category == "direction only"  # past it: as it is
    assert Claim(16.8, 2.0).mark(6.53, stopped=True) == "direction only"  # a number training does not move one way
    # the 7x7 depths: seeds 4 and 5, stopped by a clock on their plateau, cannot tell; the others are judged
    seven = verdict({0: 23.9, 1: 1.63, 2: 1.02, 3: 4.29, 4: 1.34, 5: 1.0, 6: 5.0}, depth,
                    stopped={4: "stopped at step 18,000 of 60,000 (1.34× below its plateau)",
                             5: "stopped at step 18,000 of 60,000 (1.00× below its plateau)"})
    assert seven.category == "mixed" and seven.count("against") == 2 and seven.count("stopped short") == 2
    assert seven.brief() == "mixed (0 of 7; 2 stopped short)"
    assert verdict({4: 1.34, 5: 1.0}, depth, stopped={4: "here", 5: "here"}).named == "cannot tell: seeds 4, 5: here"


def test_one_runs_drop_step_cannot_tell_and_several_are_judged_by_their_range():
    """The paper's seed 0 dropped at 22,973 on one engine and 15,783 on another: one run's drop step is one draw,
    as the paper's ~15,000 is. Several seeds are judged together: the paper's step within their range, widened by
    the tolerance (x/÷ 1.28), is as theirs; outside it, against."""
    step = Claim(15000.0, drawn=True)
    for one in (22973.0, 15783.0, float("nan")):
        v = verdict({0: one}, step)
        assert v.marks == {0: "one draw"} and v.category == "cannot tell" and v.brief() == "cannot tell: one draw"
    seven = verdict({0: 12542.0, 1: float("nan"), 3: 15305.0, 6: 8946.0}, step)  # seed 1: no drop by its budget
    assert seven.category == "reproduces" and set(seven.marks.values()) == {"one draw"}
    assert str(seven) == ("reproduces: the paper's 15,000 lies within the range of the 4 draws, 8,946 and later, "
                          "widened by the tolerance")
    assert seven.brief() == "reproduces (the paper's within the range of 4 draws)"
    four = verdict({0: 5060.0, 1: 4100.0, 2: 6900.0}, step)  # 6,900 x 1.28 = 8,860: short of 15,000
    assert four.category == "does not" and four.brief() == "does not (the paper's outside the range of 3 draws)"
    assert verdict({0: 11800.0, 1: 11000.0}, step).category == "reproduces"  # 11,800 x 1.28 = 15,152
    assert verdict({0: 15000.0, 1: float("nan")}, step, {1: "kept with its metrics alone"}).category == "cannot tell"
    with pytest.raises(ValueError, match="judged with its other draws"):
        step.mark(15000.0)


def test_the_categories_are_defined_once_and_the_rule_gives_only_them():
    assert categories_table().index.tolist() == list(CATEGORIES)
    seen = {verdict(values, Claim(2.0, 1.0), unread, errors).category for values, unread, errors in [
        ({0: 2.0, 1: 2.0}, None, None), ({0: 2.0}, None, None), ({0: 3.0}, None, None), ({0: 2.0, 1: 0.5}, None, None),
        ({0: 0.5}, None, None), ({}, {0: "no drop"}, None), ({0: 1.1, 1: 0.9}, None, {0: 0.1, 1: 0.1})]}
    assert seen == set(CATEGORIES)


def test_a_bound_the_book_chooses_is_labelled_ours():
    assert Claim(Side(0.1), ours=True).text() == "≥ 0.1 (ours)" and Claim(Side(0.1)).text() == "≥ 0.1"


@pytest.fixture(scope="module")
def table():
    return verdict_table(chapter_ladders("cpu"))


def test_the_first_pages_table_is_the_registers_every_judged_key_number_with_checks_labelled(table):
    ladders = chapter_ladders("cpu")
    assert unregistered(ladders) == []  # every number a ladder shows is a claim's of the register
    chapters = table.index.get_level_values("chapter")
    assert set(chapters) == {"sudden_drop", *(chapter.name for chapter in chapter_specs() if chapter.key_numbers)}
    registered = {(c.chapter, number.label) for c in REGISTER for number in judged_by(c)}
    assert set(table.index) == registered
    seven = table["7×7 (cpu7x7), 7 seeds"]
    assert seven.loc[("attention_patching", "restored, all layers")] == CHECK  # holds by construction: labelled
    assert seven.loc[("sudden_drop", "plateau / E[X²]")].startswith("a check")  # any copying model sits there
    assert seven.loc[("sudden_drop", "drop step")] == OWN_RECIPE  # another recipe's step: shown, not judged
    assert ("copying_phase", "× below the plateau") not in table.index  # judged once, on the sudden drop's row
    copying = seven.loc[("copying_phase", "uniform attention, pre-shift: L_obs ×")]
    # a pre-shift finding: every 7×7 seed read, the four that never dropped too, and the cell says so
    assert copying.endswith("of 7; read on 7: 3 that dropped and 4 on their plateau)")
    assert seven.loc[("attention_patching", "restored, last layer")] == \
        "does not (0 of 7; read on the 3 that dropped; 4 cannot be read)"  # which 3 of the 7 are read
    paper = [c for c in table.columns if "paper scale" in c or "rank 2" in c]
    # the paper's model (seed 0, shipped with its checkpoints): its drop at 22,973 is one draw, as the paper's
    # ~15,000 is, and every finding is read on it, so no row of its column is empty
    assert paper[0] == "7×7 rank 2 (paper), one seed, stopped at step 29,000 of 50,000"
    assert table.loc[("sudden_drop", "drop step"), paper[0]] == "cannot tell: one draw"  # the paper's recipe
    checks = table[paper[0]].str.startswith(("a check", "check of the method"))
    judged = table[paper[0]][~checks]
    assert checks.sum() == 4 and (judged.str.endswith("of 1)") | judged.str.startswith("cannot tell")).all()
    # a clock stopped it 6.53x below its plateau: the numbers training still moves, short of the paper's, cannot
    # tell yet (its depth 6.53 against 16.8, BERT ahead at 0.273 of the rates where the book asks all, the
    # masked-row probe 0.633 against <= 0.5); BERT / NN, 0.84 < 1, and regularised / BERT, 1.20 > 1 ("BERT still
    # outperforms", one-sided), are already as the paper's
    stopped = "cannot tell: stopped at step 29,000 of 50,000 (6.53× below its plateau)"
    assert judged[judged.str.startswith("cannot tell: stopped")].index.tolist() == [
        ("sudden_drop", "× below the plateau"),
        ("nuclear_norm", "masking rates where BERT beats nuclear norm min beyond 2 s.e.: share"),
        ("observed_entries", "positions permuted: L_mask ×"),  # over its own L_mask, still falling: the paper's 44×
        ("attention_patching", "last layer patched: L_mask(X) / clean L_mask"),  # 1.88, the paper's 1.09: moves
        ("probing", "masked-row probe: best layer's MSE / answering 0's")]
    assert (judged[judged.str.startswith("cannot tell: stopped")] == stopped).all()
    for consistent in (("nuclear_norm", "L: BERT / nuclear norm min"), ("nuclear_norm", "L: regularised / BERT"),
                       ("sudden_drop", "fall to half its plateau / steps on it")):  # 0.099 of its plateau's steps
        assert table.loc[consistent, paper[0]] == "consistent with (1 of 1)", consistent
    # its columns' silhouettes by column and by row, -0.001 apart, are 0.013 apart in standard error: no verdict
    assert table.loc[("embeddings", "by column − by row"), paper[0]] == "cannot tell (0 of 1)"
    # the 7x7 seeds 4 and 5, stopped by a clock at step 18,000 on their plateau, cannot tell on the depth either
    assert seven.loc[("sudden_drop", "× below the plateau")] == \
        "mixed (0 of 7; read on 7: 3 that dropped and 4 on their plateau; 2 stopped short)"
    pre_shift = ("embeddings", "position silhouette by column, pre-shift")  # untrained embeddings pass it too
    assert table.loc[pre_shift, paper[0]] == seven.loc[pre_shift] == CHECK
    assert '<a href="sudden_drop.html">The sudden drop</a>' in linked(table).index.get_level_values(0)
