"""The numbers the chapters' closing prose quotes (each in its chapter's module, ``matcomp.book.chapters``),
on small tables whose answers are known, and the GPT's sign-or-magnitude reading."""

import pandas as pd
import pytest
import torch

from matcomp.analysis.gpt import Completion, sign_and_magnitude
from matcomp.analysis.shortening import arm_summary
from matcomp.analysis.variants import identifiability
from matcomp.book.chapters.gpt import gpt_numbers
from matcomp.book.chapters.progress import progress_numbers
from matcomp.book.chapters.shortening import shortening_numbers
from matcomp.book.chapters.sizes_ranks import sizes_numbers
from matcomp.book.tables import and_text, seeds_text, span_text
from matcomp.presets import preset_config
from matcomp.runs.shipped import find_reference

ARMS = ("attention × 10 (follow-up)", "bias, fading", "bias, fading, no diagonal", "bias, kept on",
        "bias, kept on, no diagonal", "lr × 2")


def drops(*steps):
    return pd.DataFrame({"drop step": pd.array(steps, dtype="Int64")}, index=pd.Index(range(len(steps)), name="seed"))


def test_shortening_numbers_read_the_arms():
    plain = drops(5000, 6000, 11000, 15000)
    arms = {"attention × 10 (follow-up)": drops(7000, 6500, 8000, 5700), "bias, fading": drops(6300, 6900, 6600, 6400),
            "bias, fading, no diagonal": drops(None, 6200, 7900, 7500), "bias, kept on": drops(6700, 4100, 9500, 4000),
            "bias, kept on, no diagonal": drops(4300, 3800, 6400, 4400), "lr × 2": drops(8100, 10500, 7300, 7500)}
    by_seed = pd.DataFrame({"plain": plain["drop step"], **{n: d["drop step"] for n, d in arms.items()}})
    ends = pd.DataFrame({"L_mask with the change": 0.02, "L_mask without it": 0.02},
                        index=pd.MultiIndex.from_product([["plain", *ARMS], range(4)], names=["arm", "seed"]))
    ends.loc[("bias, kept on", 2), "L_mask without it"] = 0.24
    ends.loc[("bias, kept on, no diagonal", 1), "L_mask without it"] = 0.12
    numbers = shortening_numbers(by_seed, arm_summary(plain, arms, 20000), ends, 20000, plateau=1 / 9)
    assert numbers["short_kept_earlier"] == "4" and numbers["short_scale_earlier"] == "2"
    assert numbers["short_kept_span"] == "3,800–6,400" and numbers["short_plain_span"] == "5,000–15,000"
    assert numbers["short_sign_p"] == "1/8" and numbers["short_fading_width"] == "600"
    assert numbers["short_kept_win"] == "0.02–0.24" and numbers["short_kept_vs_plateau"] == "partly below"
    assert numbers["short_fading_earlier_seeds"] == "2 and 3" and numbers["short_fading_later_seeds"] == "0 and 1"
    assert numbers["short_nodiag_stays"] == "seed 0" and numbers["short_nodiag_seeds"] == "1–3"
    assert numbers["short_nodiag_span"] == "6,200–7,900" and numbers["short_nodiag_with_span"] == "6,400–6,900"


RUNS = [("size", 3, 0), ("size", 4, 0), ("size", 5, 0), ("rank", 1, 0), ("rank", 2, 0)]


def test_sizes_numbers_read_the_order_and_the_separate_runs():
    orders = pd.DataFrame({"drop step": [1000, 2000, 2500, 1100, 3000, 2900], "final L_mask": [0.03, 0.02, 0.02] * 2},
                          index=pd.MultiIndex.from_product([[0, 1], ["3x3", "4x4", "5x5"]], names=["seed", "size"]))
    table = pd.DataFrame({"leaves plateau": pd.array([5000, 4300, 5900, 4300, None], dtype="Int64"),
                          "drop step": pd.array([8000, 5000, 6700, 5000, None], dtype="Int64"),
                          "last step": [10000] * 5},
                         index=pd.MultiIndex.from_tuples(RUNS, names=["axis", "value", "seed"]))
    numbers = sizes_numbers(orders, table, preset_config("cpu"))
    assert numbers["sizes_small_first"] == "2" and numbers["sizes_small_ahead"] == "1,000–1,900"
    assert numbers["sizes_large_last"] == "1" and numbers["sizes_large_after"] == "500"
    assert numbers["sizes_large_before"] == "100" and numbers["sizes_mix_span"] == "1,000–3,000"
    assert numbers["sizes_alone_order"] == "4×4 (4,300) < 3×3 (5,000) < 5×5 (5,900)"
    assert numbers["sizes_alone_fall"] == "3×3 3,000, 4×4 700, 5×5 800"
    assert numbers["sizes_rank_fate"] == "rank 2 stays on its plateau (2/9) for all 10,000 steps"
    assert (numbers["sizes_dof"], numbers["sizes_seen"], numbers["sizes_entries"]) == ("12", "11", "16")
    assert numbers["sizes_rank_undetermined"] == "68%"  # of a 4×4 rank-2 matrix's missing entries: the
    # chapter's table's 0.678, from the same masks (it read 69% from 20,000 others, beside the table's 0.678)
    share = identifiability([(4, 4, 2)], 0.3).iloc[0]["missing undetermined"]
    assert numbers["sizes_rank_undetermined"] == f"{share:.0%}"


def test_progress_numbers_read_leads_over_seeds_and_windows():
    index = pd.MultiIndex.from_product([[0, 1], [1, 3]], names=["seed", "window"])
    by_seed = pd.DataFrame({"drop step": [5000, 5000, 10000, 10000], "loss onset": [4200, 4250, 9000, 9000],
                            "row attention": [400, 450, -50, -50], "column attention": [100, 100, 1000, 1200],
                            "collapse": [0, 900, 3000, 2900], "collapse (missing)": [-50, -50, 150, 150],
                            "prediction spread": [0, 0, 50, 0], "column clustering": [-200, -200, 100, 100],
                            "row clustering": [100, 50, 0, 0], "first to move": "x"}, index=index)
    numbers = progress_numbers(by_seed, spacing=50)
    assert numbers["prog_att_every"] == "2" and numbers["prog_row_ahead"] == "1" and numbers["prog_col_ahead"] == "2"
    assert numbers["prog_att_span"] == "400–1,200" and numbers["prog_row_seeds"] == "0"
    assert numbers["prog_col_seeds"] == "1" and numbers["prog_att_window"] == "200"
    assert numbers["prog_collapse_max"] == "3,000" and numbers["prog_collapse_seed"] == "1"
    assert numbers["prog_collapse_share"] == "30%" and numbers["prog_collapse_flips"] == "1"
    assert numbers["prog_spread_with"] == "2" and numbers["prog_missing_with"] == "1"
    assert numbers["prog_att_max_share"] == "12%" and numbers["prog_onset_span"] == "800–1,000"


def test_gpt_numbers_read_accuracy_and_the_completion_table():
    steps = list(range(25, 20001, 25))
    metrics = pd.DataFrame({"step": steps, "eval_acc_mask": [0.1 + 0.1 * s / 20000 for s in steps]})
    table = pd.DataFrame({"L_obs": [0, 0, 0, 0, 0], "L_mask": [0.22, 0.111, 0.025, 0.03, 1 / 9]},
                         index=["GPT, greedy", "GPT, mean", "BERT, post-shift", "BERT, at 20,000", "predict 0"])
    completion = Completion(table, "GPT, greedy", "GPT, mean",
                            {"post-shift": "BERT, post-shift", "at the GPT's steps": "BERT, at 20,000"}, "predict 0")
    reading = {"sign right": 0.48, "|x| MSE": 0.01, "|x| MSE of E|x|": 0.046, "MSE": 0.227, "MSE, random sign": 0.225}
    numbers = gpt_numbers(metrics, reading, completion)
    assert (numbers["gpt_mark_1"], numbers["gpt_acc_1"]) == ("3,000", "0.12")
    assert numbers["gpt_late_flat"] == "still moving" and numbers["gpt_acc_mask"] == "0.20"
    assert (numbers["gpt_greedy_ratio"], numbers["gpt_bert_ratio"], numbers["gpt_sign"]) == ("2.0", "4.4", "0.48")
    assert numbers["gpt_mean"] == "0.111" and numbers["gpt_bert"] == "0.025"  # the lower of BERT's two rows


def test_a_model_that_knows_the_magnitude_but_not_the_sign_reads_as_such():
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(64, 16, generator=generator) * 2 - 1
    missing = torch.zeros_like(x, dtype=torch.bool)
    sign = torch.where(torch.rand(64, 16, generator=generator) < 0.5, -1.0, 1.0)
    coin = sign_and_magnitude(sign * x.abs(), x, missing)
    assert coin["sign right"] == pytest.approx(0.5, abs=0.07) and coin["|x| MSE"] == pytest.approx(0.0)
    assert coin["MSE"] == pytest.approx(2 * coin["MSE of 0"], rel=0.15)
    assert coin["MSE"] == pytest.approx(coin["MSE, random sign"], rel=0.15)
    knows = sign_and_magnitude(x, x, missing)
    assert knows["sign right"] == 1.0 and knows["MSE"] == 0.0
    zero = sign_and_magnitude(torch.zeros_like(x), x, missing)
    assert zero["sign right"] == 0.0 and zero["|x| MSE"] > zero["|x| MSE of E|x|"]


def test_texts_of_spans_lists_and_seeds():
    assert span_text([3, None, 1]) == "1–3" and and_text([1]) == "1" and seeds_text([1, 2]) == "1 and 2"


def test_the_answer_at_missing_entries_is_read_rising_before_the_loss_leaves_its_plateau():
    import numpy as np

    from matcomp.analysis.phases import answer_rise
    from matcomp.drop import detect_drop

    step = np.arange(1, 3001)
    loss = np.interp(step, [0, 2000, 2500, 3000], [0.11, 0.11, 0.01, 0.01])
    answer = np.interp(step, [0, 1000, 2000, 2500, 3000], [0.05, 0.01, 0.05, 0.15, 0.15])
    metrics = pd.DataFrame({"step": step, "L_mask": loss, "mask_value": answer})
    drop = detect_drop(metrics)
    rise = answer_rise(metrics, drop)
    assert rise["lowest step"] == pytest.approx(1000, abs=60) and rise["lowest"] == pytest.approx(0.011, abs=0.002)
    assert 2000 < rise["leave step"] < rise["drop step"] < 2500
    assert rise["lowest"] < 0.06 < rise["at leave"] < rise["at drop"]
    flat = metrics.assign(L_mask=0.11)
    assert answer_rise(flat, detect_drop(flat)) is None


def test_the_rank_search_table_reads_each_run_and_the_masks_name_the_tasks_no_less_determined():
    from matcomp.book.chapters.sizes_ranks import identifiability_values, rank_search_table

    reading = pd.DataFrame({"best row head / uniform": [1.01, 1.049, 1.039],
                            "best column head / uniform": [1.0, 1.02, 1.03],
                            "L_mask / E[X²]": [0.95, 0.94, 0.944], "collapse (missing)": [0.98, 0.99, 0.991]},
                           index=[13000, 14000, 24000])
    count = pd.DataFrame({"missing undetermined": [0.243, 0.678, 0.091]},
                         index=["3×3 rank 1", "4×4 rank 2", "6×6 rank 2"])
    falling = reading.assign(**{"L_mask / E[X²]": [0.95, 0.94, 0.5]})  # a run leaving its plateau says so
    table = rank_search_table({"6×6 rank 2": reading, "r": falling}, {"r": 20500})
    flat = table.loc["6×6 rank 2"]
    assert flat["checkpoints"] == "13,000–24,000"
    assert (flat["best row head, most"], flat["at the last"]) == (1.049, 1.039)
    assert flat["best column head, most"] == 1.03 and flat["early step"] == 14000 and flat["since early"] == "flat"
    assert flat["L_mask / E[X²], last"] == 0.944 and pd.isna(flat["drop step"])
    assert table.loc["r", "since early"] == "moved" and table.loc["r", "drop step"] == 20500
    masks = identifiability_values(count, "3×3 rank 1", 8077)
    assert masks == {"masks_bar": "24.3%", "masks_reference": "3×3 rank 1", "masks_fate": "drops at step 8,077 here",
                     "masks_fine": "6×6 rank 2 (9.1%)", "masks_hard": "4×4 rank 2 (67.8%)"}
    assert identifiability_values(count, "3×3 rank 1", None)["masks_fate"] == "does not drop here"


def test_rank_drop_numbers_read_the_shipped_gpu_run_around_its_drop():
    from matcomp.book.chapters.sizes_ranks import rank_drop_numbers

    numbers = rank_drop_numbers()  # the paper's run, shipped with its metrics and head measures alone
    run = find_reference(preset_config("paper", {"train.precision": "tf32", "train.steps": 32000}))
    assert numbers["rank2_task"] == "7×7 rank 2" and numbers["rank2_last"] == "32,000"
    assert numbers["rank2_drop"] == f"{run.drop.half_step:,}" and numbers["rank2_below"] == f"{run.drop.factor:.1f}"
    before, drop, after = (int(numbers[k].replace(",", "")) for k in ("rank2_before_step", "rank2_drop",
                                                                      "rank2_after_step"))
    assert before < drop < after and after - before == 2000  # the measures' neighbours of the drop
    heads_before = [float(v.rstrip("×")) for v in numbers["rank2_heads_before"].split(" and ")]
    heads_after = [float(v.rstrip("×")) for v in numbers["rank2_heads_after"].split(" and ")]
    assert max(heads_before) < 1.1 and min(heads_after) > 5  # still uniform before, well off it after


def test_the_leftover_heads_are_set_beside_the_paper_s_by_the_book_s_one_rule():
    from matcomp.book.chapters.head_taxonomy import leftover_text

    paper = 0.01575 / 0.01428  # the paper's L_mask with / without its uninterpretable heads (§3.2.2)
    table = lambda ratio: pd.DataFrame({"heads": [3], "L_mask ratio": [ratio]}, index=["other"])  # noqa: E731
    assert "(§3.2.2): about the same effect. The two groups are not alike" in leftover_text(table(paper * 1.2))
    assert "a larger effect than there" in leftover_text(table(paper * 1.4))
    assert "a smaller effect than there. The two groups" in leftover_text(table(paper / 1.4))
    assert "the paper's 5 uninterpretable heads (all in its last two layers)" in leftover_text(table(paper))
    assert leftover_text(pd.DataFrame({"heads": [], "L_mask ratio": []})).startswith("Every head of this model")


def test_the_mask_table_says_where_the_longest_column_family_can_be_tested():
    from matcomp.analysis.heads import fig5_mask, separating_mask
    from matcomp.book.chapters.head_taxonomy import identity_values, mask_table

    families = pd.DataFrame({"families": [frozenset({"masked-row"}), frozenset({"masked-row", "identity"}),
                                          frozenset({"longest-contiguous-column"}), frozenset()],
                             "self_observed": [0.1, 0.3, 0.1, 0.05]},
                            index=pd.MultiIndex.from_tuples([(0, 0), (0, 1), (1, 0), (1, 1)], names=["layer", "head"]))
    table = mask_table({"paper": fig5_mask(7, 7), "separating": separating_mask(7, 7)}, {"separating": families})
    paper, separating = table.loc["paper"], table.loc["separating"]
    assert (paper["longest column"], paper["its run"], paper["next run"]) == (1, 6, 3)
    assert paper["masked rows' kept entries in it"] == "(3,1)" and paper["longest-column family"].startswith("not")
    assert pd.isna(paper["masked-row heads"])  # no model classified on the paper's own mask
    assert separating["longest-column family"] == "testable" and separating["masked rows' kept entries in it"] == "none"
    assert (separating["masked-row heads"], separating["longest-column heads"]) == (2, 1)
    values = identity_values(families, 16, 2.0)
    assert (values["ht_id_threshold"], values["ht_id_uniform"]) == ("0.12", "0.062")
    assert values["ht_id_heads"].data.startswith("The 1 identity heads here put 0.30 on themselves")
    assert identity_values(families.iloc[[0]], 16, 2.0)["ht_id_heads"].data == "No head reaches it here."


def test_the_gpt_run_values_read_accuracy_attention_gains_and_completions():
    from types import SimpleNamespace

    from matcomp.book.chapters.gpt import run_values

    steps = list(range(0, 1001, 100))
    metrics = pd.DataFrame({"step": steps, "eval_acc_obs": [0.0, 0.2, 0.6, 0.95, 1, 1, 1, 1, 1, 1, 1],
                            "eval_acc_mask": [0.05] * 10 + [0.3]})
    run = SimpleNamespace(metrics=metrics, config=SimpleNamespace(run_id="gpt-1"))
    index = pd.MultiIndex.from_product([["step 200", "step 600"], [0, 1], [0, 1]],
                                       names=["checkpoint", "layer", "head"])
    scores = pd.DataFrame({"to_entry": [0.1, 0.2, 0.3, 0.4, 0.1, 0.1, 0.9, 0.8],
                           "to_last_input": [0.1, 0.7, 0.2, 0.3, 0.0, 0.0, 0.0, 0.1]}, index=index)
    gains = pd.DataFrame({"gain": [0.01, -0.2], "se": [0.02, 0.01], "flat": [True, False], "window": [250, 250]},
                         index=["eval_acc_mask", "L_full"])
    table = pd.DataFrame({"L_mask": [0.22, 0.111, 0.025, 1 / 9]}, index=["greedy", "mean", "BERT", "zero"])
    completion = Completion(table, "greedy", "mean", {"post": "BERT"}, "zero")
    values = run_values(run, 200, scores, 200, 600, gains, completion)
    assert (values["gr_run"], values["gr_half"], values["gr_most"]) == ("gpt-1", "at step 200", "at step 300")
    assert (values["gr_obs_first"], values["gr_mask_first"], values["gr_mask_final"]) == ("0.00", "0.05", "0.17")
    assert (values["gr_entry_after"], values["gr_entry_before"]) == ("0.90, 0.80", "0.30, 0.40")
    assert (values["gr_rest_layer"], values["gr_rest_head"], values["gr_rest"]) == ("0", "1", "0.70")
    assert values["gr_acc_moved"] == "+0.010 ± 0.020 (flat)"
    assert values["gr_loss_moved"] == "-0.200 ± 0.010 (still moving)"
    assert (values["gr_greedy"], values["gr_zero"], values["gr_bert"]) == ("0.22", "0.111", "0.025 post")
