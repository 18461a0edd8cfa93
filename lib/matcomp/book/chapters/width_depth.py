"""The width-and-depth chapter (NeurIPS App. H): the drop over widths and depths at the chapter's seeds,
and a papermill sweep over depth."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from matcomp.analysis.seeds import seed_configs, seeds_from
from matcomp.analysis.variants import (
    variant_configs,
    variant_overrides,
)
from matcomp.book.chapter import chapter_config, open_runs
from matcomp.book.parameters import COUNT, COUNTS, FOLDER, STEP, STEPS, parameter
from matcomp.book.spec import ChapterSpec, RunParameters
from matcomp.config import RunConfig
from matcomp.presets import preset_name
from matcomp.runs.run import Run
from matcomp.sizes import chapter_sizes


@dataclass(frozen=True)
class Parameters(RunParameters):
    """The parameters of the chapter's notebook (its ``parameters`` cell says what each does)."""

    widths: list[int] | None = parameter(None, COUNTS)  # hidden sizes; None: the preset's list (cpu: 32, 64, 128)
    depths: list[int] | None = parameter(None, COUNTS)  # numbers of layers; None: the preset's list (cpu: 2, 4, 6)
    seeds: int | None = parameter(None, COUNT)  # seeds per point, from `seed` on; None: the preset's
    steps: int | None = parameter(None, STEPS)  # budget of every run; None: the preset's
    # steps a run trains past its drop before it stops (0: its whole budget); None: the preset's
    after_drop: int | None = parameter(None, STEP)
    # where the sweep of the last section writes its notebooks; None: <run store>/sweeps/depth
    sweep_out: str | None = parameter(None, FOLDER)


def runs_read(preset: str) -> list[RunConfig]:
    """Every width and depth at the scale's shape seeds."""
    cfg, size = chapter_config(preset), chapter_sizes(preset)
    axes = {"width": list(size.widths), "depth": list(size.depths)}
    steps = size.steps("shape_steps", cfg)
    return [seed_cfg.override(change) for seed_cfg in seed_configs(cfg, seeds_from(cfg, size.shape_seeds)).values()
            for change in variant_overrides(seed_cfg, axes, steps, size.after_drop).values()]


class Opening(NamedTuple):
    """What ``setup`` opens: the config, the runs' budget, each variant's changes and its runs (variant and seed
    -> run), the chapter's own width and depth, and the depths."""

    cfg: RunConfig
    steps: int
    variants: dict[tuple[str, int], dict]
    runs: dict[tuple[str, int, int], Run]
    own: dict[str, int]
    depths: list[int]


def setup(p: Parameters) -> Opening:
    """The chapter's config, the runs' budget, each variant's changes and its runs (variant -> seed -> run),
    the chapter's own width and depth, and the depths (None: the preset's); printed."""
    cfg = chapter_config(p.preset, p.seed, p.overrides)
    size = chapter_sizes(p.preset)
    widths, depths = p.widths or list(size.widths), p.depths or list(size.depths)
    steps = p.steps or size.steps("shape_steps", cfg)
    after_drop = size.after_drop if p.after_drop is None else p.after_drop
    variants = variant_overrides(cfg, {"width": widths, "depth": depths}, steps, after_drop)
    runs = open_runs(variant_configs(cfg, variants, seeds_from(cfg, p.seeds or size.shape_seeds)), p.preset)
    own = {"width": cfg.model.hidden, "depth": cfg.model.layers}
    print(f"{preset_name(p.preset)} preset: width {own['width']} and depth {own['depth']} are the chapter's runs; "
          f"every run has lr {cfg.train.lr:g} (the chapter's, at every shape) and up to {steps:,} steps"
          + (f", stopping {after_drop:,} steps after its drop" if after_drop else ""))
    return Opening(cfg, steps, variants, runs, own, depths)


CHAPTER = ChapterSpec("width_depth", Parameters, runs_read, opening=Opening)
