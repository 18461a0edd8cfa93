"""The shortening chapter (NeurIPS §4, App. I): interventions that shorten the plateau, each over the same
seeds as plain training; and the numbers its prose quotes of the default preset's arms."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import pandas as pd

from matcomp.analysis.progress import progress_configs
from matcomp.analysis.seeds import drop_over_seeds, seed_configs, seeds_from, trained_on
from matcomp.analysis.shortening import (
    FADING,
    FADING_NO_DIAGONAL,
    KEPT_ON,
    KEPT_ON_NO_DIAGONAL,
    LR,
    SCALED,
    STAYS,
    arm_summary,
    shortening_defaults,
    with_and_without,
)
from matcomp.book.chapter import chapter_config, open_run, open_runs
from matcomp.book.chapters import seed_part_configs
from matcomp.book.judging.verdicts import seed_list
from matcomp.book.parameters import COUNT, parameter
from matcomp.book.spec import ChapterSpec, RunParameters
from matcomp.book.tables import and_text, seeds_text, span_text
from matcomp.config import RunConfig
from matcomp.overrides import parse_overrides
from matcomp.presets import DEFAULT_PRESET, preset_config
from matcomp.runs.run import Run
from matcomp.sizes import chapter_sizes


@dataclass(frozen=True)
class Parameters(RunParameters):
    """The parameters of the chapter's notebook (its ``parameters`` cell says what each does)."""

    seeds: int | None = parameter(None, COUNT)  # how many seeds, from `seed` on; None: the preset's (4)
    intervention: str = ''  # an extra change to compare (example above)


def runs_read(preset: str) -> list[RunConfig]:
    """Plain training at the chapter's seeds, then each arm at the same seeds."""
    plain = seed_part_configs(preset, "shortening_seeds")
    changes = shortening_defaults(plain[0], chapter_sizes(preset).after_drop).values()
    return plain + [c.override(change) for change in changes for c in plain]


def arm_configs(cfg: RunConfig, changed: dict[str, RunConfig], seeds: Sequence[int]) -> dict[str, dict[int, RunConfig]]:
    """Plain training (``cfg``) and each arm of ``changed`` at ``seeds``: arm -> seed -> config, plain first."""
    return {name: seed_configs(c, seeds) for name, c in ({"plain": cfg} | changed).items()}


def arm_drops(configs: dict[str, dict[int, RunConfig]], preset: str | None):
    """The runs of ``arm_configs`` (arm -> seed -> run, plain first), plain training's drops (``drop_over_seeds``)
    and each changed arm's."""
    arms = {name: open_runs(seeds, preset) for name, seeds in configs.items()}
    return arms, drop_over_seeds(arms["plain"]), {name: drop_over_seeds(arms[name]) for name in arms if name != "plain"}


class Opening(NamedTuple):
    """What ``setup`` opens: the seeds, each changed arm's config, every arm's runs (arm -> seed -> run), plain
    training's drops, each changed arm's, and the budget."""

    seed_list: range
    changed: dict[str, RunConfig]
    arms: dict[str, dict[int, Run]]
    plain: pd.DataFrame
    drops: dict[str, pd.DataFrame]
    budget: int


def setup(p: Parameters) -> Opening:
    """The seeds (None: the preset's), each arm's config (the defaults, and ``p.intervention`` as "custom"),
    every arm's runs (arm -> seed -> run), plain training's drops, each arm's, and the budget; the arms'
    changes are printed."""
    cfg, size = chapter_config(p.preset, p.seed, p.overrides), chapter_sizes(p.preset)
    seed_list = seeds_from(cfg, p.seeds or size.shortening_seeds)
    custom = {"custom": parse_overrides(p.intervention)} if p.intervention else {}
    changes = shortening_defaults(cfg, size.after_drop) | custom
    changed = {name: cfg.override(change) for name, change in changes.items()}
    arms, plain, drops = arm_drops(arm_configs(cfg, changed, seed_list), p.preset)
    budget = cfg.train.steps
    for name, change in changes.items():
        print(f"{name}: " + ", ".join(f"{k}={v}" for k, v in change.items()))
    return Opening(seed_list, changed, arms, plain, drops, budget)


def quoted_configs() -> tuple[dict[str, dict[int, RunConfig]], dict[int, RunConfig]]:
    """The default preset's runs that the closing prose quotes at every preset: its arms at the chapter's seeds
    (``arm_configs``), and the same seeds' progress runs, trained on the arms' machine (seed -> config)."""
    cfg, size = preset_config(DEFAULT_PRESET), chapter_sizes(DEFAULT_PRESET)
    seeds = seeds_from(cfg, size.shortening_seeds)
    changed = {name: cfg.override(change) for name, change in shortening_defaults(cfg, size.after_drop).items()}
    return arm_configs(cfg, changed, seeds), progress_configs(cfg, seeds, size.after_drop)


def default_shortening() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, int]:
    """The shortening comparison on the default preset's runs: drop step by seed (seeds x arms), the
    ``arm_summary``, the ``with_and_without`` ends, and the budget (steps)."""
    arms, plain, drops = arm_drops(quoted_configs()[0], DEFAULT_PRESET)
    budget = next(iter(arms["plain"].values())).config.train.steps
    by_seed = pd.DataFrame({"plain": plain["drop step"], **{name: d["drop step"] for name, d in drops.items()}})
    return by_seed, arm_summary(plain, drops, budget), with_and_without(arms), budget


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
    kept, fading, no_diagonal = KEPT_ON_NO_DIAGONAL, FADING, FADING_NO_DIAGONAL
    without = ends.loc[[arm for arm in STAYS if arm in ends.index.get_level_values("arm")], "L_mask without it"]
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
        "short_scale_earlier": earlier(SCALED), "short_kepton_earlier": earlier(KEPT_ON),
        "short_scale_span": span_text(by_seed[SCALED]),
        "short_scale_sd": sd(SCALED),
        "short_fading_span": span_text(by_seed[fading]), "short_fading_sd": sd(fading),
        "short_fading_width": f"{fading_steps.max() - fading_steps.min():,.0f}" if len(fading_steps) else "no",
        "short_fading_earlier_seeds": and_text(fading_vs_plain.index[fading_vs_plain < 0]),
        "short_fading_later_seeds": and_text(fading_vs_plain.index[fading_vs_plain > 0]),
        "short_fading_with": f"{fade_end['L_mask with the change']:.4f}",
        "short_fading_without": f"{fade_end['L_mask without it']:.4f}",
        "short_nodiag_stays": seed_list(by_seed.index[~dropped]) if (~dropped).any() else "no seed",
        "short_nodiag_span": span_text(by_seed.loc[dropped, no_diagonal]),
        "short_nodiag_with_span": span_text(by_seed.loc[dropped, fading]),
        "short_nodiag_seeds": seeds_text(by_seed.index[dropped]),
        "short_lr_span": span_text(by_seed[LR]), "short_lr_sd": sd(LR),
    }


def default_twins() -> dict[str, str]:
    """Where the default preset's plain runs were trained on another machine than its shortening arms (keys
    ``short_twin_*``): those seeds, both machines, and the drop steps of the same seeds' progress runs, trained
    on the arms' machine (the same config but for its checkpoints)."""
    arms, twins = quoted_configs()
    first_arm = next(name for name in arms if name != "plain")
    rows = {}
    for seed in twins:
        plain, changed = (open_run(arms[name][seed]) for name in ("plain", first_arm))
        rows[seed] = {"plain": trained_on(plain.summary), "arms": trained_on(changed.summary),
                      "twin": trained_on((twin := open_run(twins[seed])).summary),
                      "twin drop": twin.drop.half_step, "plain drop": plain.drop.half_step}
    table = pd.DataFrame.from_dict(rows, orient="index")
    other = table[table["plain"] != table["arms"]]
    return {"short_twin_seeds": seeds_text(other.index) if len(other) else "none",
            "short_twin_plain": and_text(other["plain"].unique()), "short_twin_arms": and_text(table["arms"].unique()),
            "short_twin_machine": and_text(other["twin"].unique()),
            "short_twin_steps": and_text(f"{s:,}" if pd.notna(s) else "none" for s in other["twin drop"]),
            "short_twin_plain_steps": and_text(f"{s:,}" if pd.notna(s) else "none" for s in other["plain drop"])}


def _quoted_runs() -> list[RunConfig]:
    arms, twins = quoted_configs()
    return [cfg for seeds in arms.values() for cfg in seeds.values()] + list(twins.values())


CHAPTER = ChapterSpec("shortening", Parameters, runs_read, opening=Opening, quoted=_quoted_runs)
