"""The sizes-and-ranks chapter (NeurIPS §4, App. G): a mixture of sizes, each size and rank alone, and the
rank-2 search; and the sentences and numbers its prose quotes of the default preset's runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import pandas as pd

from matcomp.analysis.progress import L_MASK, against_uniform, lead_table, progress_table
from matcomp.analysis.seeds import seed_configs, seeds_from
from matcomp.analysis.variants import (
    mixture_orders,
    mixture_overrides,
    order_resolution,
    undetermined_fraction,
    variant_configs,
    variant_overrides,
    variant_table,
)
from matcomp.book.chapter import (
    chapter_config,
    model_preset,
    open_run,
    open_runs,
    rank_search_configs,
    rank_search_drops,
)
from matcomp.book.parameters import COUNT, COUNTS, STEPS, parameter
from matcomp.book.spec import ChapterSpec, RunParameters
from matcomp.book.tables import and_text, at_step, list_text, span_text
from matcomp.config import RunConfig
from matcomp.data import second_moment
from matcomp.presets import DEFAULT_PRESET, preset_config
from matcomp.runs.run import Run
from matcomp.sizes import ChapterSizes, chapter_sizes


@dataclass(frozen=True)
class Parameters(RunParameters):
    """The parameters of the chapter's notebook (its ``parameters`` cell says what each does)."""

    seeds: int | None = parameter(None, COUNT)  # seeds of the mixture; None: the preset's (cpu: 3)
    # square sizes of the mixture and of the separate runs; None: the preset's (cpu: 3, 4, 5; paper: 5, 7, 9)
    sizes: list[int] | None = parameter(None, COUNTS)
    # ranks of the separate runs; None: the preset's (cpu: 1, 2; paper: 1-4)
    ranks: list[int] | None = parameter(None, COUNTS)
    # steps of each separate run (sizes and ranks); None: 10,000 on the cpu preset, else the preset's own
    steps: int | None = parameter(None, STEPS)


def runs_read(preset: str) -> list[RunConfig]:
    """The mixture of sizes at the scale's seeds, each size and rank alone, the rank-2 search, and the
    one-model run the search is read beside."""
    cfg, size = chapter_config(preset), chapter_sizes(preset)
    mixture = cfg.override(mixture_overrides(list(size.mixture_sizes)))
    mixtures = seed_configs(mixture, seeds_from(cfg, size.seeds)).values()
    axes = {"size": list(size.mixture_sizes), "rank": list(size.ranks)}
    alone = variant_overrides(cfg, axes, size.steps("size_steps", cfg)).values()
    search = rank_search_configs(preset)
    one_model = [chapter_config(size.one_model)] if size.one_model and search else []
    return [*mixtures, *(cfg.override(change) for change in alone), *search, *one_model]


class Opening(NamedTuple):
    """What ``setup`` opens: the config and the scale's sizes, the separate runs' budget, the mixture's config
    and its runs (seed -> run), and the seeds, sizes and ranks."""

    cfg: RunConfig
    size: ChapterSizes
    steps: int
    mixture_cfg: RunConfig
    mixtures: dict[int, Run]
    seeds: int
    sizes: list[int]
    ranks: list[int]


def setup(p: Parameters) -> Opening:
    """The chapter's config and sizes, the separate runs' budget, the mixture's config and its runs at the
    seeds, and the seeds, sizes and ranks (None: the preset's)."""
    cfg = chapter_config(p.preset, p.seed, p.overrides)
    size = chapter_sizes(p.preset)
    seeds, sizes, ranks = p.seeds or size.seeds, p.sizes or list(size.mixture_sizes), p.ranks or list(size.ranks)
    steps = p.steps or size.steps("size_steps", cfg)
    mixture_cfg = cfg.override(mixture_overrides(sizes))
    mixtures = open_runs(seed_configs(mixture_cfg, seeds_from(cfg, seeds)), p.preset)
    print(f"mixture of sizes {sizes}, rank 1, {mixture_cfg.train.steps:,} steps: "
          + ", ".join(f"seed {s} {r.config.run_id}" for s, r in mixtures.items()))
    return Opening(cfg, size, steps, mixture_cfg, mixtures, seeds, sizes, ranks)


class Quoted(NamedTuple):
    """The default preset's mixture and separate runs, which the closing prose quotes at every preset: its config,
    the mixture's sizes, the separate runs' budget, the mixture's configs (seed -> config) and the separate runs'
    (``variant_configs``)."""

    cfg: RunConfig
    sizes: list[int]
    steps: int
    mixture: dict[int, RunConfig]
    alone: dict[tuple[str, int, int], RunConfig]


def quoted_configs() -> Quoted:
    """The default preset's runs behind ``default_sizes`` (``Quoted``)."""
    cfg, size = preset_config(DEFAULT_PRESET), chapter_sizes(DEFAULT_PRESET)
    sizes, steps = list(size.mixture_sizes), size.steps("size_steps", cfg)
    return Quoted(cfg, sizes, steps, seed_configs(cfg.override(mixture_overrides(sizes)), seeds_from(cfg, size.seeds)),
                  variant_configs(cfg, variant_overrides(cfg, {"size": sizes, "rank": list(size.ranks)}, steps)))


def default_sizes() -> tuple[pd.DataFrame, pd.DataFrame, RunConfig]:
    """The sizes-and-ranks chapter's two tables on the default preset's runs (``quoted_configs``): the mixture's
    drop order (``mixture_orders``) and the separate runs (``variant_table``), with the default config."""
    quoted = quoted_configs()
    mixtures, runs = open_runs(quoted.mixture, DEFAULT_PRESET), open_runs(quoted.alone, DEFAULT_PRESET)
    return mixture_orders(mixtures, quoted.sizes), variant_table(runs, quoted.steps), quoted.cfg


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
        "sizes_large_after": and_text(f"{v:,.0f}" for v in later[later > 0]),
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


def rank_drop_numbers() -> dict[str, str]:
    """What the sizes_ranks chapter's prose quotes of the rank-2 search's run that drops, at the default
    preset (keys ``rank2_*``): its task, its drop step, where it ends against its plateau, and its best row
    and column heads at its last checkpoint before the drop and its first after; and how early the one-model
    run, which drops, leaves its plateau (``rank1_moves``, ``early_move``), which the search's runs are read
    against."""
    runs = list(rank_search_drops(DEFAULT_PRESET, as_shipped=True).values())
    if len(runs) != 1:
        raise ValueError(f"the rank-2 search at the {DEFAULT_PRESET} preset has {len(runs)} runs that drop; "
                         "its prose reads one")
    run = runs[0]
    drop, table = run.drop, against_uniform(run, progress_table(run))
    before, after = table[table.index < drop.half_step].iloc[-1], table[table.index > drop.half_step].iloc[0]
    heads = "best row head / uniform", "best column head / uniform"
    data = run.config.data
    one_model = open_run(_default_one_model(), DEFAULT_PRESET)
    measures = progress_table(one_model)
    drop_step = one_model.drop.half_step
    if drop_step is None:
        raise ValueError(f"the {DEFAULT_PRESET} scale's one-model run {one_model.config.run_id} has no drop; its prose "
                         "reads one that drops")
    moves = early_move(against_uniform(one_model, measures), lead_table(measures, drop_step), drop_step)
    return {**moves,
            "rank2_task": f"{data.n_rows}×{data.n_cols} rank {data.rank}", "rank2_drop": f"{drop.half_step:,}",
            "rank2_below": f"{drop.factor:.1f}", "rank2_last": f"{run.last_step:,}",
            "rank2_before_step": f"{int(before.name):,}", "rank2_after_step": f"{int(after.name):,}",
            "rank2_heads_before": " and ".join(f"{before[h]:.2f}×" for h in heads),
            "rank2_heads_after": " and ".join(f"{after[h]:.1f}×" for h in heads)}


FLAT = 0.05  # L_mask within this share of its early value: on its plateau still


def early_move(table: pd.DataFrame, leads: pd.DataFrame, drop_step: int) -> dict[str, str]:
    """How early a run that drops leaves its plateau, as the sizes_ranks prose quotes it (keys ``rank1_*``): the
    first checkpoint of ``table`` (``against_uniform``) where its best row or column head is ``FLAT`` or more above
    uniform attention while its L_mask is still within ``FLAT`` of its level at the first checkpoint after step 0,
    and where the progress chapter's onset rule (``leads``: ``lead_table``) starts its heads and its loss. The prose
    says the heads move first; a run whose heads do not is a ValueError, since the sentence would be false.

    >>> steps = [0, 1000, 2000, 3000, 4000]
    >>> table = pd.DataFrame({"best row head / uniform": [1.0, 1.0, 1.07, 1.3, 6.0],
    ...                       "best column head / uniform": [1.0, 1.01, 1.02, 1.2, 5.0],
    ...                       "L_mask / E[X²]": [3.9, 0.98, 0.97, 0.9, 0.2]}, index=steps)
    >>> leads = pd.DataFrame({"onset step": [3000, 3000, 4000]}, index=["row attention", "column attention", L_MASK])
    >>> early_move(table, leads, 3500)  # doctest: +NORMALIZE_WHITESPACE
    {'rank1_row': '1.07', 'rank1_column': '1.02', 'rank1_step': '2,000', 'rank1_ahead': '1,500', 'rank1_drop': '3,500',
     'rank1_level': '0.97', 'rank1_heads_onset': '3,000', 'rank1_loss_onset': '4,000'}
    """
    heads = table[["best row head / uniform", "best column head / uniform"]]
    level = table["L_mask / E[X²]"]
    early = level[level.index > 0].iloc[0]
    moved = (heads.max(axis=1) >= 1 + FLAT) & ((level / early - 1).abs() < FLAT) & (table.index < drop_step)
    onsets = leads["onset step"]
    heads_onset = onsets[["row attention", "column attention"]].dropna()
    if not moved.any() or not len(heads_onset) or pd.isna(onsets[L_MASK]):
        raise ValueError("the sizes_ranks prose says that the default one-model run's heads leave uniform attention "
                         "while its loss is on its plateau, with an onset for each; this run's do not")
    step = int(moved.idxmax())
    row, column = heads.loc[step]
    return {"rank1_row": f"{row:.2f}", "rank1_column": f"{column:.2f}", "rank1_step": f"{step:,}",
            "rank1_ahead": f"{drop_step - step:,}", "rank1_drop": f"{drop_step:,}", "rank1_level": f"{level[step]:.2f}",
            "rank1_heads_onset": f"{int(heads_onset.min()):,}", "rank1_loss_onset": f"{int(onsets[L_MASK]):,}"}


def rank_search_table(readings: dict[str, pd.DataFrame], drops: dict[str, int] | None = None) -> pd.DataFrame:
    """The rank-2 search's runs read, a row per run of ``readings`` (label -> ``analysis.progress.against_uniform``
    table): how far its best heads left uniform attention, where its L_mask ends against its level at the first
    checkpoint after step 0 (flat: within ``FLAT`` of it, the level this evaluation batch gives a copying model,
    not a move off the plateau), the collapse of its missing positions, and its drop step where ``drops``
    (label -> step) has one."""
    rows, drops = {}, drops or {}
    for label, table in readings.items():
        row, column = table["best row head / uniform"], table["best column head / uniform"]
        level = table["L_mask / E[X²]"]
        early = table.index[min(1, len(table) - 1)]
        rows[label] = {"checkpoints": f"{table.index[0]:,}–{table.index[-1]:,}", "best row head, most": row.max(),
                       "at the last": row.iloc[-1], "best column head, most": column.max(),
                       "L_mask / E[X²], last": level.iloc[-1], "early": level[early], "early step": int(early),
                       "since early": "flat" if abs(level.iloc[-1] / level[early] - 1) < FLAT else "moved",
                       "collapse (missing), last": table["collapse (missing)"].iloc[-1], "drop step": drops.get(label)}
    return pd.DataFrame.from_dict(rows, orient="index").astype({"drop step": "Int64"}).rename_axis("run")


def identifiability_values(count: pd.DataFrame, reference: str, reference_drop: int | None) -> dict[str, str]:
    """What the sentence on the tasks' masks quotes (keys ``masks_*``): the share of missing entries no completion
    recovers (``count``: ``analysis.variants.identifiability``) at the task ``reference``, whose run here drops at
    ``reference_drop`` (None: no drop), and the tasks with no more, and with more.

    >>> count = pd.DataFrame({"missing undetermined": [0.243, 0.678, 0.091]}, index=["3×3", "4×4 r2", "6×6 r2"])
    >>> identifiability_values(count, "3×3", None)  # doctest: +NORMALIZE_WHITESPACE
    {'masks_bar': '24.3%', 'masks_reference': '3×3', 'masks_fate': 'does not drop here', 'masks_fine': '6×6 r2 (9.1%)',
     'masks_hard': '4×4 r2 (67.8%)'}
    """
    free = count["missing undetermined"]
    bar = free[reference]
    fine, hard = free[free <= bar].drop(reference), free[free > bar]
    listed = lambda shares: and_text(f"{task} ({v:.1%})" for task, v in shares.items())  # noqa: E731
    return {"masks_bar": f"{bar:.1%}", "masks_reference": reference,
            "masks_fate": "does not drop here" if reference_drop is None else f"drops at step {reference_drop:,} here",
            "masks_fine": listed(fine), "masks_hard": listed(hard)}


def order_lines(orders: pd.DataFrame, resolution: int) -> list[str]:
    """Each seed's order of a ``mixture_orders`` table: "<" between drops more than ``resolution`` steps apart (or
    before a size with no drop in the run) and "≈" otherwise."""
    lines = []
    for seed, rows in orders.groupby(level="seed", sort=False):
        steps = rows["drop step"].droplevel("seed")
        parts = [f"{size} ({step:,})" if pd.notna(step) else f"{size} (no drop)" for size, step in steps.items()]
        text = parts[0]
        for (a, b), part in zip(zip(steps.iloc[:-1], steps.iloc[1:]), parts[1:]):
            apart = pd.notna(a) and (pd.isna(b) or b - a > resolution)
            text += (" < " if apart else " ≈ ") + part
        lines.append(f"Seed {seed}: {text}.")
    return lines


def mixture_values(orders: pd.DataFrame, mixture_cfg: RunConfig, cfg: RunConfig, alone: Run,
                   sizes: list[int]) -> dict[str, str]:
    """What the sentences under the mixture's orders quote (keys ``mix_*``): how often a drop step is read, the
    ``order_resolution``, where the chapter's run alone drops, each size's final L_mask (mean over seeds) and the
    share of its missing entries no rank-1 completion recovers."""
    final = orders["final L_mask"].groupby(level="size").mean()
    return {"mix_eval_every": str(mixture_cfg.train.eval_every), "mix_resolution": str(order_resolution(mixture_cfg)),
            "mix_alone": f"{cfg.data.n_rows}x{cfg.data.n_cols}", "mix_alone_drop": at_step(alone.drop.half_step),
            "mix_final": ", ".join(f"{n} {v:.3f}" for n, v in final.items()), "mix_p_mask": f"{cfg.data.p_mask}",
            "mix_undetermined": ", ".join(f"{n}x{n} {undetermined_fraction(n, n, cfg.data.p_mask):.0%}" for n in sizes)}


def order_table(orders: pd.DataFrame, resolution: int) -> pd.DataFrame:
    """Every pair of consecutive sizes of a ``mixture_orders`` table, a row each: in how many of the seeds where
    both drop the smaller is learned first, the gaps, and at how many seeds they are more than ``resolution``
    steps apart."""
    table = orders["drop step"].unstack("size")
    sizes = sorted(table.columns, key=lambda name: int(name.split("x")[0]))
    rows = {}
    for a, b in zip(sizes[:-1], sizes[1:]):
        gaps = (table[b] - table[a]).dropna().astype(int)
        rows[f"{a} before {b}"] = {"seeds where both drop": len(gaps), "smaller first": int((gaps > 0).sum()),
                                   "larger − smaller (steps)": list_text(f"{g:+,}" for g in gaps),
                                   f"more than {resolution} steps apart": int((gaps.abs() > resolution).sum())}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("sizes")


def _default_one_model() -> RunConfig:
    """The default preset's one-model run, which ``rank_drop_numbers`` reads beside the rank-2 search."""
    return preset_config(model_preset(DEFAULT_PRESET))


def _quoted_runs() -> list[RunConfig]:
    quoted = quoted_configs()
    return [*quoted.mixture.values(), *quoted.alone.values(), *rank_search_configs(DEFAULT_PRESET, as_shipped=True),
            _default_one_model()]


CHAPTER = ChapterSpec("sizes_ranks", Parameters, runs_read, opening=Opening, quoted=_quoted_runs)
