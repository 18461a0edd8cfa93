"""The numbers the chapters' closing prose quotes, computed from the runs (glued into the text with
``matcomp.book.tables.glue_texts``), so that no sentence types a result.

Each ``*_numbers`` function reads tables the chapter already computes and returns {glue key: text}; each
``default_*`` function computes those tables on the book's default preset (``cpu``), whose runs are
shipped, so that a closing section that speaks of the default preset quotes it at every preset."""

from __future__ import annotations

import pandas as pd

from matcomp.analysis.gpt import completion_table, greedy_reading, late_gain
from matcomp.analysis.progress import against_uniform, leads_over_seeds, progress_configs, progress_table
from matcomp.analysis.seeds import drop_over_seeds, seed_configs, seeds_from, trained_on
from matcomp.analysis.shortening import arm_summary, shortening_defaults, with_and_without
from matcomp.analysis.variants import (
    mixture_orders,
    mixture_overrides,
    order_resolution,
    undetermined_fraction,
    variant_configs,
    variant_overrides,
    variant_table,
)
from matcomp.book.chapter import DEFAULT_PRESET, rank_search_drops, trained_run, trained_runs
from matcomp.book.sizes import chapter_sizes
from matcomp.book.tables import and_text, span_text
from matcomp.config import RunConfig
from matcomp.data import sample_batch, second_moment
from matcomp.drop import final_losses
from matcomp.presets import preset
from matcomp.runs.cost import duration
from matcomp.runs.run import Run
from matcomp.seeding import analysis_generator


def seeds_text(seeds) -> str:
    """Seeds as "0–3" (consecutive) or "0, 2 and 5".

    >>> seeds_text(range(4)), seeds_text([0, 2, 5]), seeds_text([3])
    ('0–3', '0, 2 and 5', '3')
    """
    seeds = list(seeds)
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}–{seeds[-1]}"
    return and_text(seeds)


# -- shortening ------------------------------------------------------------------------------------

def default_shortening() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, int]:
    """The shortening comparison on the default preset's runs: drop step by seed (seeds x arms), the
    ``arm_summary``, the ``with_and_without`` ends, and the budget (steps)."""
    cfg, size = preset(DEFAULT_PRESET), chapter_sizes(DEFAULT_PRESET)
    seeds = seeds_from(cfg, size.shortening_seeds)
    changed = {name: cfg.override(change) for name, change in shortening_defaults(cfg, size.after_drop).items()}
    arms = {name: trained_runs(seed_configs(c, seeds), DEFAULT_PRESET)
            for name, c in ({"plain": cfg} | changed).items()}
    plain = drop_over_seeds(arms["plain"])
    drops = {name: drop_over_seeds(arms[name]) for name in changed}
    by_seed = pd.DataFrame({"plain": plain["drop step"], **{name: d["drop step"] for name, d in drops.items()}})
    summary = arm_summary(plain, drops, cfg.train.steps)
    return by_seed, summary, with_and_without(arms), cfg.train.steps


KEPT_ON = ("attention × 10 (follow-up)", "bias, kept on", "bias, kept on, no diagonal")  # arms whose change stays


def shortening_numbers(by_seed: pd.DataFrame, summary: pd.DataFrame, ends: pd.DataFrame,
                       budget: int, plateau: float) -> dict[str, str]:
    """What the shortening chapter's closing prose quotes (keys ``short_*``): each arm's drop-step range
    and sd, how many seeds it is earlier than plain training on, the kept-on bias's L_mask without the
    bias, the fading bias with and without it, and the seeds that drop with and without its diagonal;
    ``plateau`` is the copying plateau r/9, which the kept-on arms' L_mask without their change is read against."""
    def earlier(arm: str) -> str:
        return summary.loc[arm, "earlier than plain"].split("/")[0]

    def sd(arm: str) -> str:
        value = summary.loc[arm, "sd"]
        return "undefined" if pd.isna(value) else f"{value:,.0f}"

    n = len(by_seed)
    kept, fading, no_diagonal = "bias, kept on, no diagonal", "bias, fading", "bias, fading, no diagonal"
    without = ends.loc[[arm for arm in KEPT_ON if arm in ends.index.get_level_values("arm")], "L_mask without it"]
    fade_end = ends.xs(fading, level="arm").mean()
    dropped = by_seed[no_diagonal].notna()
    fading_vs_plain = by_seed[fading] - by_seed["plain"]
    fading_steps = by_seed[fading].dropna()
    return {
        "short_seeds": seeds_text(by_seed.index), "short_n": str(n), "short_budget": f"{budget:,}",
        "short_kept_earlier": earlier(kept), "short_kept_span": span_text(by_seed[kept]),
        "short_plain_span": span_text(by_seed["plain"]), "short_plain_sd": sd("plain"),
        "short_sign_p": f"1/{2 ** (n - 1)}",
        "short_kept_win": span_text(without, "{:.2f}"), "short_plateau": f"{plateau:.3f}",
        "short_kept_vs_plateau": "at or above" if without.min() >= plateau else "partly below",
        "short_scale_earlier": earlier("attention × 10 (follow-up)"), "short_kepton_earlier": earlier("bias, kept on"),
        "short_scale_span": span_text(by_seed["attention × 10 (follow-up)"]),
        "short_scale_sd": sd("attention × 10 (follow-up)"),
        "short_fading_span": span_text(by_seed[fading]), "short_fading_sd": sd(fading),
        "short_fading_width": f"{fading_steps.max() - fading_steps.min():,.0f}" if len(fading_steps) else "no",
        "short_fading_earlier_seeds": and_text(fading_vs_plain.index[fading_vs_plain < 0]),
        "short_fading_later_seeds": and_text(fading_vs_plain.index[fading_vs_plain > 0]),
        "short_fading_with": f"{fade_end['L_mask with the change']:.4f}",
        "short_fading_without": f"{fade_end['L_mask without it']:.4f}",
        "short_nodiag_stays": and_text(by_seed.index[~dropped]),
        "short_nodiag_span": span_text(by_seed.loc[dropped, no_diagonal]),
        "short_nodiag_with_span": span_text(by_seed.loc[dropped, fading]),
        "short_nodiag_seeds": seeds_text(by_seed.index[dropped]),
        "short_lr_span": span_text(by_seed["lr × 2"]), "short_lr_sd": sd("lr × 2"),
    }


def default_twins(seeds) -> dict[str, str]:
    """Where the default preset's plain runs of ``seeds`` were trained on another machine than the
    shortening arms (keys ``short_twin_*``): those seeds, both machines, and the drop steps of the same
    seeds' progress runs, trained on the arms' machine (the same config but for its checkpoints)."""
    cfg, size = preset(DEFAULT_PRESET), chapter_sizes(DEFAULT_PRESET)
    arm = cfg.override(next(iter(shortening_defaults(cfg, size.after_drop).values())))
    twins = progress_configs(cfg, seeds, size.after_drop)
    rows = {}
    for seed in seeds:
        plain, changed = (trained_run(c.override({"train.seed": seed})) for c in (cfg, arm))
        rows[seed] = {"plain": trained_on(plain.summary), "arms": trained_on(changed.summary),
                      "twin": trained_on((twin := trained_run(twins[seed])).summary),
                      "twin drop": twin.drop.half_step, "plain drop": plain.drop.half_step}
    table = pd.DataFrame.from_dict(rows, orient="index")
    other = table[table["plain"] != table["arms"]]
    return {"short_twin_seeds": seeds_text(other.index) if len(other) else "none",
            "short_twin_plain": and_text(other["plain"].unique()), "short_twin_arms": and_text(table["arms"].unique()),
            "short_twin_machine": and_text(other["twin"].unique()),
            "short_twin_steps": and_text(f"{s:,}" if pd.notna(s) else "none" for s in other["twin drop"]),
            "short_twin_plain_steps": and_text(f"{s:,}" if pd.notna(s) else "none" for s in other["plain drop"])}


# -- sizes and ranks -------------------------------------------------------------------------------

def default_sizes() -> tuple[pd.DataFrame, pd.DataFrame, RunConfig]:
    """The sizes-and-ranks chapter's two tables on the default preset's runs: the mixture's drop order
    (``mixture_orders``) and the separate runs (``variant_table``), with the default config."""
    cfg, size = preset(DEFAULT_PRESET), chapter_sizes(DEFAULT_PRESET)
    sizes = list(size.mixture_sizes)
    mixture = cfg.override(mixture_overrides(sizes))
    mixtures = trained_runs(seed_configs(mixture, seeds_from(cfg, size.seeds)), DEFAULT_PRESET)
    steps = size.steps("size_steps", cfg)
    runs = trained_runs(variant_configs(cfg, variant_overrides(cfg, {"size": sizes, "rank": list(size.ranks)}, steps)),
                        DEFAULT_PRESET)
    return mixture_orders(mixtures, sizes), variant_table(runs, steps), cfg


def sizes_numbers(orders: pd.DataFrame, table: pd.DataFrame, cfg: RunConfig) -> dict[str, str]:
    """What the sizes-and-ranks chapter's closing prose quotes (keys ``sizes_*``): the mixture's drop steps,
    how often its smallest size drops first and by how much, the order of the next two sizes seed by seed,
    the floor of the smallest size, and the separate runs' order, fall times and the higher rank's fate."""
    drops = orders["drop step"].astype("Float64").unstack("size")
    names = sorted(drops.columns, key=lambda name: int(name.split("x")[0]))  # "3x3", "4x4", ...
    small, middle, large = names[0], names[1], names[-1]
    ns = [int(name.split("x")[0]) for name in names]
    ahead = (drops[middle] - drops[small]).dropna()
    later = (drops[large] - drops[middle]).dropna()
    undetermined = undetermined_fraction(ns[0], ns[0], cfg.data.p_mask)
    plateau = second_moment(cfg.data)
    runs = table.droplevel("seed")
    sizes, ranks = runs.loc["size"], runs.loc["rank"]
    order = sizes["leaves plateau"].dropna().sort_values()
    fall = (sizes["drop step"] - sizes["leaves plateau"]).dropna()
    higher = ranks.drop(index=cfg.data.rank)
    rank_fates = [f"rank {r} " + (f"drops at step {int(row['drop step']):,}" if pd.notna(row["drop step"]) else
                                  f"stays on its plateau ({r}/9) for all {int(row['last step']):,} steps")
                  for r, row in higher.iterrows()]
    seen = (1 - cfg.data.p_mask) * cfg.data.n_rows * cfg.data.n_cols
    rank = int(higher.index[0]) if len(higher) else cfg.data.rank
    free = undetermined_fraction(cfg.data.n_rows, cfg.data.n_cols, cfg.data.p_mask, rank)
    return {
        "sizes_mix_span": span_text(drops.stack()), "sizes_seeds": str(len(drops)),
        "sizes_small_first": str(int((drops.idxmin(axis=1) == small).sum())),
        "sizes_small_ahead": span_text(ahead),
        "sizes_resolution": f"{order_resolution(cfg.override(mixture_overrides(ns))):,}",
        "sizes_large_last": str(int((later > 0).sum())),
        "sizes_large_after": and_text(f"{v:,.0f}" for v in later[later > 0]) or "none",
        "sizes_large_before": and_text(f"{-v:,.0f}" for v in later[later <= 0]),
        "sizes_final": ", ".join(f"{name} {v:.3f}" for name, v in
                                 orders["final L_mask"].groupby(level="size").mean().reindex(names).items()),
        "sizes_undetermined": f"{undetermined:.2f}", "sizes_floor": f"{undetermined * plateau:.3f}",
        "sizes_alone_order": " < ".join(f"{int(v)}×{int(v)} ({order[v]:,})" for v in order.index),
        "sizes_alone_fall": ", ".join(f"{int(v)}×{int(v)} {fall[v]:,}" for v in fall.index),
        "sizes_rank_fate": "; ".join(rank_fates) or "no other rank",
        "sizes_dof": f"{rank * (cfg.data.n_rows + cfg.data.n_cols - rank)}", "sizes_seen": f"{seen:.0f}",
        "sizes_entries": f"{cfg.data.n_rows * cfg.data.n_cols}",
        "sizes_rank_undetermined": f"{free:.0%}",
    }


# -- progress --------------------------------------------------------------------------------------

def default_progress(windows, samples: int) -> tuple[pd.DataFrame, int]:
    """The progress chapter's leads over seeds and windows (``leads_over_seeds``) on the default
    preset's progress runs, and their checkpoint spacing (steps)."""
    cfg, size = preset(DEFAULT_PRESET), chapter_sizes(DEFAULT_PRESET)
    configs = progress_configs(cfg, seeds_from(cfg, size.progress_seeds), size.after_drop)
    runs = trained_runs(configs, DEFAULT_PRESET)
    return leads_over_seeds(runs, windows, samples), next(iter(configs.values())).train.checkpoint_every


def progress_numbers(by_seed: pd.DataFrame, spacing: int) -> dict[str, str]:
    """What the progress chapter's closing prose quotes (keys ``prog_*``), from a ``leads_over_seeds``
    table (seed x window) whose checkpoints are ``spacing`` steps apart: the drops; the attention lead
    (row or column, whichever is larger on a seed) and how many seeds each alone leads on; the collapse
    lead and how the window moves it; the measures that move with the loss; the loss's own onset."""
    by_seed = by_seed.dropna(subset=["drop step"])
    first = by_seed.groupby(level="seed").first()
    drops = first["drop step"].astype(float)
    lead = by_seed.drop(columns=["first to move"]).astype(float)
    attention = lead[["row attention", "column attention"]].max(axis=1).groupby(level="seed")
    leads_every = attention.min() > spacing
    ahead = (lead > spacing).groupby(level="window").sum()  # seeds ahead, per window and measure
    unsmoothed = lead.xs(lead.index.get_level_values("window").min(), level="window")
    row_first = unsmoothed["row attention"] >= unsmoothed["column attention"]
    change = lead.groupby(level="seed").agg(lambda s: s.max() - s.min()).max()
    collapse = lead["collapse"].dropna()
    flips = (lead["collapse"] > spacing).groupby(level="seed").nunique() > 1
    top_seed, top_lead = attention.max().idxmax(), attention.max().max()
    c_seed = collapse.idxmax()[0] if len(collapse) else None
    return {
        "prog_seeds": seeds_text(first.index), "prog_n": str(len(first)), "prog_drop_span": span_text(drops),
        "prog_att_every": str(int(leads_every.sum())),
        "prog_row_ahead": str(int(ahead["row attention"].max())),
        "prog_col_ahead": str(int(ahead["column attention"].max())),
        "prog_att_span": span_text(attention.max()[leads_every].tolist() + attention.min()[leads_every].tolist()),
        "prog_row_seeds": seeds_text(unsmoothed.index[row_first]),
        "prog_col_seeds": seeds_text(unsmoothed.index[~row_first]),
        "prog_att_window": f"{change[['row attention', 'column attention']].max():,.0f}",
        "prog_collapse_max": f"{collapse.max():,.0f}" if len(collapse) else "none",
        "prog_collapse_seed": str(c_seed),
        "prog_collapse_share": f"{collapse.max() / drops[c_seed]:.0%}" if c_seed is not None else "none",
        "prog_collapse_window": f"{change['collapse']:,.0f}", "prog_collapse_flips": str(int(flips.sum())),
        "prog_spread_with": str(int((unsmoothed["prediction spread"].abs() <= spacing).sum())),
        "prog_missing_with": str(int((unsmoothed["collapse (missing)"].abs() <= spacing).sum())),
        "prog_colclust_after": str(int((unsmoothed["column clustering"] < 0).sum())),
        "prog_rowclust_ahead": span_text(ahead["row clustering"]),
        "prog_att_max": f"{top_lead:,.0f}", "prog_att_max_seed": str(top_seed),
        "prog_att_max_drop": f"{drops[top_seed]:,.0f}", "prog_att_max_share": f"{top_lead / drops[top_seed]:.0%}",
        "prog_onset_span": span_text(drops - first["loss onset"].astype(float)),
    }


# -- gpt -------------------------------------------------------------------------------------------

def default_gpt(samples: int) -> tuple[Run, dict[str, float], pd.DataFrame]:
    """The default preset's GPT run, the ``greedy_reading`` of its last checkpoint and its ``completion_table``
    beside the default BERT, on ``samples`` matrices drawn as the gpt chapter draws them."""
    gpt, bert = (trained_run(preset(name)) for name in (f"{DEFAULT_PRESET}_gpt", DEFAULT_PRESET))
    batch = sample_batch(gpt.config.data, samples, analysis_generator(gpt.config.train.seed))
    return gpt, greedy_reading(gpt.gpt(gpt.steps[-1]), batch), completion_table(gpt, bert, batch)


def gpt_run_numbers(run: Run) -> dict[str, str]:
    """How long a run trained and where (keys ``gpt_time``, ``gpt_machine``), from its ``complete.json``."""
    return {"gpt_time": duration(run.summary.get("train_s", float("nan"))), "gpt_machine": trained_on(run.summary)}


def gpt_numbers(metrics: pd.DataFrame, reading: dict[str, float], table: pd.DataFrame,
                marks=(0.15, 0.45)) -> dict[str, str]:
    """What the gpt chapter's closing prose quotes (keys ``gpt_*``): the greedy accuracy at missing entries
    (a mean over a fortieth of the run) at the fractions ``marks`` of the run and over its last quarter, with
    ``late_gain``'s verdict, and at its end (``drop.final_losses``); the greedy reading of the missing entries
    (``sign_and_magnitude``); and the
    completion table of the chapter (GPT greedy and softmax-mean rows first, then BERT's, then answering 0)."""
    evals = metrics.dropna(subset=["eval_acc_mask"]).set_index("step")["eval_acc_mask"]
    last = int(evals.index.max())
    gain = late_gain(metrics)
    late = evals[evals.index > last - gain["window"]].rolling(20, min_periods=1).mean()

    steps = [int(evals.index[abs(evals.index - mark * last).argmin()]) for mark in marks]
    accuracy = [evals[abs(evals.index - step) <= last / 80].mean() for step in steps]  # ±250 steps at 20,000

    bert = table.loc[[name for name in table.index if name.startswith("BERT")], "L_mask"].min()
    zero = table["L_mask"].iloc[-1]
    return {
        "gpt_steps": f"{last:,}", "gpt_mark_1": f"{steps[0]:,}", "gpt_mark_2": f"{steps[1]:,}",
        "gpt_acc_1": f"{accuracy[0]:.2f}", "gpt_acc_2": f"{accuracy[1]:.2f}",
        "gpt_acc_late": span_text(late, "{:.2f}"), "gpt_late_window": f"{gain['window']:,.0f}",
        "gpt_late_gain": f"{gain['gain']:+.3f} ± {gain['se']:.3f}", "gpt_late_flat": "flat" if gain["flat"] else
        "still moving",
        "gpt_acc_mask": f"{final_losses(metrics)['eval_acc_mask']:.2f}", "gpt_greedy": f"{table['L_mask'].iloc[0]:.3f}",
        "gpt_greedy_ratio": f"{table['L_mask'].iloc[0] / zero:.1f}", "gpt_mean": f"{table['L_mask'].iloc[1]:.3f}",
        "gpt_zero": f"{zero:.3f}", "gpt_bert": f"{bert:.3g}", "gpt_bert_ratio": f"{zero / bert:.1f}",
        "gpt_sign": f"{reading['sign right']:.2f}", "gpt_abs": f"{reading['|x| MSE']:.3f}",
        "gpt_abs_const": f"{reading['|x| MSE of E|x|']:.3f}", "gpt_random_sign": f"{reading['MSE, random sign']:.3f}",
        "gpt_reading_mse": f"{reading['MSE']:.3f}",
    }


# -- head taxonomy ---------------------------------------------------------------------------------

def longest_column_verdict(margin: dict) -> str:
    """Whether a structured mask can test the longest-contiguous-column family, from its
    ``longest_column_margin``: only if the column stands out and holds none of the masked rows' kept
    entries (else a head attending there cannot be told from a masked-row head).

    >>> longest_column_verdict({"column": 1, "run": 6, "next run": 3, "shared with masked rows": [(3, 1)]})[:61]
    'its longest column (column 1, a run of 6 against 3) holds the'
    """
    where = f"its longest column (column {margin['column']}, a run of {margin['run']} against {margin['next run']})"
    shared = ", ".join(f"({i},{j})" for i, j in margin["shared with masked rows"])
    if shared:
        return (f"{where} holds the masked rows' kept entries {shared}, so a head attending there cannot be told "
                f"from a masked-row head: the longest-contiguous-column family is not testable on it")
    if margin["run"] <= margin["next run"]:
        return f"{where} does not stand out, so the longest-contiguous-column family is not testable on it"
    return f"{where} stands out and holds no masked row's kept entry, so the family is testable on it"


def identity_text(families: pd.DataFrame, positions: int, identity_enrichment: float) -> str:
    """How much the identity family's threshold decides: the mass it asks of a head on itself at observed
    queries (``identity_enrichment`` × uniform, 1/``positions``), the range the identity heads of
    ``families`` (a ``classify_heads`` table) reach, and how many keep the label at twice the threshold."""
    uniform = 1 / positions
    threshold = identity_enrichment * uniform
    identity = families.loc[families["families"].str.contains("identity"), "self_observed"]
    if identity.empty:
        return (f"Identity asks {identity_enrichment:g}× uniform on itself at observed queries "
                f"({threshold:.2f} of the mass; uniform is 1/{positions} = {uniform:.3f}); no head reaches it here.")
    return (f"Identity asks {identity_enrichment:g}× uniform on itself at observed queries ({threshold:.2f} of the "
            f"mass; uniform is 1/{positions} = {uniform:.3f}), and more than it gives any other key of its row or "
            f"column. The {len(identity)} identity heads here put {span_text(identity, '{:.2f}')} on themselves; at "
            f"twice the threshold ({2 * threshold:.2f}) {int((identity >= 2 * threshold).sum())} of them would keep "
            f"the label. A head at the threshold gives itself {identity_enrichment:g} times what a key gets under "
            f"uniform attention: a weak but specific diagonal, not a strong one.")


def rank_drop_numbers() -> dict[str, str]:
    """What the sizes_ranks chapter's prose quotes of the rank-2 search's run that drops, at the default
    preset (keys ``rank2_*``): its task, its drop step, where it ends against its plateau, and its best row
    and column heads at its last checkpoint before the drop and its first after."""
    runs = list(rank_search_drops(DEFAULT_PRESET).values())
    if len(runs) != 1:
        raise ValueError(f"the rank-2 search at the {DEFAULT_PRESET} preset has {len(runs)} runs that drop; "
                         "its prose reads one")
    run = runs[0]
    drop, table = run.drop, against_uniform(run, progress_table(run))
    before, after = table[table.index < drop.half_step].iloc[-1], table[table.index > drop.half_step].iloc[0]
    heads = "best row head / uniform", "best column head / uniform"
    data = run.config.data
    return {"rank2_task": f"{data.n_rows}×{data.n_cols} rank {data.rank}", "rank2_drop": f"{drop.half_step:,}",
            "rank2_below": f"{drop.factor:.1f}", "rank2_last": f"{run.last_step:,}",
            "rank2_before_step": f"{int(before.name):,}", "rank2_after_step": f"{int(after.name):,}",
            "rank2_heads_before": " and ".join(f"{before[h]:.2f}×" for h in heads),
            "rank2_heads_after": " and ".join(f"{after[h]:.1f}×" for h in heads)}


def rank_search_findings(readings: dict[str, pd.DataFrame], count: pd.DataFrame, reference: str,
                         reference_drop: int | None, drops: dict[str, int] | None = None) -> list[str]:
    """The sizes_ranks chapter's sentences on the rank-2 search: for each run of ``readings`` (label ->
    ``analysis.progress.against_uniform`` table) how far its best heads left uniform attention, where its
    L_mask and the collapse of its missing positions end, and its drop step where ``drops`` (label -> step)
    has one; then the tasks of ``count`` (``analysis.variants.identifiability``) whose missing entries are no
    less determined than those of the task ``reference``, whose run here drops at ``reference_drop`` (None:
    no drop)."""
    sentences, drops = [], drops or {}
    for label, table in readings.items():
        row, column, last = table["best row head / uniform"], table["best column head / uniform"], table.iloc[-1]
        dropped = f" It drops at step {drops[label]:,}." if label in drops else ""
        sentences.append(f"{label}, checkpoints {table.index[0]:,}–{table.index[-1]:,}: the best row head reaches "
                         f"{row.max():.3f}× uniform attention at most ({row.iloc[-1]:.3f}× at the last), the best "
                         f"column head {column.max():.3f}×; at the last checkpoint L_mask is "
                         f"{last['L_mask / E[X²]']:.2f}× E[X²] and the collapse {last['collapse (missing)']:.2f}."
                         + dropped)
    free = count["missing undetermined"]
    bar = free[reference]
    fine, hard = free[free <= bar].drop(reference), free[free > bar]
    fate = f"which drops at step {reference_drop:,} here" if reference_drop is not None else "which does not drop here"
    sentences.append(f"Missing entries no completion recovers: {bar:.1%} at {reference}, {fate}; "
                     + (f"no more at {and_text(f'{task} ({v:.1%})' for task, v in fine.items())}, so their masks do "
                        "not stand in the way of a drop" if len(fine) else "every other task has more")
                     + (f"; more at {and_text(f'{task} ({v:.1%})' for task, v in hard.items())}." if len(hard)
                        else "."))
    return sentences
