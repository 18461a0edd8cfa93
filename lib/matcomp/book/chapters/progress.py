"""The progress chapter: measures of hidden progress read at dense checkpoints over the plateau, how far
each leads the drop over seeds, an alarm scored on held-out seeds; and the numbers its prose quotes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import pandas as pd

from matcomp.analysis import alarm
from matcomp.analysis.phases import Phases
from matcomp.analysis.progress import (
    leads_over_seeds,
    progress_configs,
    progress_table,
)
from matcomp.analysis.seeds import seeds_from, trained_on
from matcomp.book.chapter import chapter_config, open_run, open_runs
from matcomp.book.parameters import COUNT, COUNTS, parameter
from matcomp.book.phase_notes import phase_note
from matcomp.book.spec import ChapterSpec, RunParameters
from matcomp.book.tables import seeds_text, span_text, steps_text
from matcomp.config import RunConfig
from matcomp.presets import DEFAULT_PRESET, preset_config
from matcomp.runs.run import Run
from matcomp.sizes import ChapterSizes, chapter_sizes


@dataclass(frozen=True)
class Parameters(RunParameters):
    """The parameters of the chapter's notebook (its ``parameters`` cell says what each does)."""

    samples: int = parameter(256, COUNT)  # matrices every checkpoint is measured on
    # runs (seeds from `seed` on) whose leads are compared and the alarm was fitted on; None: the preset's (5)
    seeds: int | None = parameter(None, COUNT)
    # seeds after those on which the alarm is scored; None: the preset's (8)
    held_out: int | None = parameter(None, COUNT)
    # smoothing windows (checkpoints, trailing mean) at which the leads are read
    windows: list[int] = parameter([1, 3, 5, 9], COUNTS)


def runs_read(preset: str) -> list[RunConfig]:
    """The progress runs (dense checkpoints) of the seeds the measures are fitted on, then of those the alarm is
    held out on, and the larger tasks' runs the alarm is scored on too."""
    cfg, size = chapter_config(preset), chapter_sizes(preset)
    seeds = seeds_from(cfg, size.progress_seeds + size.alarm_seeds)
    larger = [chapter_config(name) for name in size.ladder]
    return list(progress_configs(cfg, seeds, size.after_drop).values()) + larger


class Opening(NamedTuple):
    """What ``setup`` opens: the config, the progress run and its phases, the seeds, every seed's config, the
    run's progress measures, its checkpoint spacing and the scale's sizes."""

    cfg: RunConfig
    run: Run
    phases: Phases
    seeds: int
    configs: dict[int, RunConfig]
    table: pd.DataFrame
    spacing: int
    size: ChapterSizes


def setup(p: Parameters) -> Opening:
    """The chapter's config, its progress run (``progress_configs``: dense checkpoints) and phases, the seeds
    of the several-seed part (None: the preset's), every seed's config, the run's progress measures on
    ``p.samples`` matrices, its checkpoint spacing and the preset's sizes."""
    cfg, size = chapter_config(p.preset, p.seed, p.overrides), chapter_sizes(p.preset)
    seeds = p.seeds or size.progress_seeds
    configs = progress_configs(cfg, seeds_from(cfg, seeds), size.after_drop)
    run, phases = open_run(configs[cfg.train.seed], p.preset, with_phases=True, metrics_only="train")
    print(phase_note(run, phases))
    table = progress_table(run, p.samples)
    spacing = configs[cfg.train.seed].train.checkpoint_every
    print(f"{len(table)} checkpoints measured, every {spacing} steps from step {table.index[0]} to {table.index[-1]}")
    return Opening(cfg, run, phases, seeds, configs, table, spacing, size)


def quoted_configs() -> dict[int, RunConfig]:
    """The default preset's progress runs of the seeds the measures are fitted on (seed -> config): what the
    closing prose quotes at every preset."""
    cfg, size = preset_config(DEFAULT_PRESET), chapter_sizes(DEFAULT_PRESET)
    return progress_configs(cfg, seeds_from(cfg, size.progress_seeds), size.after_drop)


def default_progress(windows, samples: int) -> tuple[pd.DataFrame, int]:
    """The progress chapter's leads over seeds and windows (``leads_over_seeds``) on the default
    preset's progress runs (``quoted_configs``), and their checkpoint spacing (steps)."""
    configs = quoted_configs()
    runs = open_runs(configs, DEFAULT_PRESET)
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


def seed_findings(by_seed: pd.DataFrame, seeds: int, spacing: int, runs: dict[int, Run], cfg: RunConfig,
                  preset: str | None) -> list[str]:
    """The chapter's sentences on its seeds (a ``leads_over_seeds`` table, checkpoints ``spacing`` steps apart):
    which drop and where, how far attention leads, and the machines the progress ``runs`` and the same seeds'
    plain runs (``cfg`` at those seeds, which the other chapters read) trained on. Which measure moves first at
    each window, and each behavioural measure's lead, are the tables' (``lead_summary``, ``smoothing_sensitivity``)."""
    dropped = by_seed.dropna(subset=["drop step"])
    drops = dropped["drop step"].groupby(level="seed").first()
    if not len(drops):
        return ["No seed drops within its run at this preset: no measure can lead."]
    onsets = dropped["loss onset"].groupby(level="seed").first()
    sentences = [f"{len(drops)} of {seeds} seeds drop, at steps " + ", ".join(f"{s:,}" for s in drops) + "; the "
                 f"loss's own onset comes {', '.join(f'{d - o:,}' for d, o in zip(drops, onsets))} steps before the "
                 "drop (unsmoothed)."]
    attention = dropped[["row attention", "column attention"]].astype(float).max(axis=1).groupby(level="seed")
    sentences.append(f"Row or column attention (whichever leads) moves before the loss by more than one checkpoint "
                     f"at every window on {int((attention.min() > spacing).sum())} of {len(drops)} seeds, by "
                     + ", ".join(f"{lo:,.0f}" + (f"–{hi:,.0f}" if hi > lo else "")
                                 for lo, hi in zip(attention.min(), attention.max()))
                     + " steps (seed by seed, over the windows).")
    twins = open_runs({s: cfg.override({"train.seed": s}) for s in drops.index}, preset)
    sentences.append("These runs trained on " + "; ".join(f"seed {s}: {trained_on(r.summary)}" for s, r in runs.items())
                     + ". The same seeds without the dense checkpoints, the runs the other chapters read, drop at "
                     + "; ".join(f"seed {s}: {steps_text([twins[s].drop.half_step])} ({trained_on(twins[s].summary)})"
                                 for s in drops.index)
                     + ": a drop step moves with the machine's float arithmetic (its CPU and threads), which the "
                     "shortening chapter measures.")
    return sentences


def alarm_values(scores: pd.DataFrame, resolution: int) -> dict[str, str]:
    """What the sentence on held-out runs' ``score`` table quotes (keys ``alarm_*``): the hits, false alarms and
    misses of both rules and attention's lead over the loss where both hit; the lead *holds* when attention hits
    at least as often, raises no more false alarms, and comes first by a median of more than ``resolution``
    steps (one checkpoint)."""
    table = alarm.summary(scores)
    att, loss = table.loc["attention"], table.loc["loss"]
    ahead = alarm.lead_over_loss(scores)
    holds = (att["hits"] >= loss["hits"] and att["false alarms"] <= loss["false alarms"] and len(ahead) > 0
             and ahead.median() > resolution)
    lead = (f"where both hit ({len(ahead)} runs), attention comes first by a median of {ahead.median():,.0f} steps "
            f"({ahead.min():,.0f} to {ahead.max():,.0f})" if len(ahead) else "they never both hit")
    counts = {f"alarm_{rule}_{key.replace(' ', '_')}": str(row[key]) for rule, row in (("att", att), ("loss", loss))
              for key in ("hits", "false alarms", "misses")}
    return {"alarm_runs": str(att["runs"]), **counts, "alarm_lead": lead,
            "alarm_holds": "holds" if holds else "does not hold"}


CHAPTER = ChapterSpec("progress", Parameters, runs_read, opening=Opening,
                      quoted=lambda: list(quoted_configs().values()))
