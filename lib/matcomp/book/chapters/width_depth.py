"""The width-and-depth chapter (NeurIPS App. H): the drop over widths and depths at the chapter's seeds,
and a papermill sweep over depth."""

from __future__ import annotations

from matcomp.analysis.seeds import seed_configs, seeds_from
from matcomp.analysis.variants import (
    READ_AFTER_DROP,
    variant_configs,
    variant_overrides,
    variant_summary,
    variant_table,
    width_loss_ratios,
)
from matcomp.book.chapter import chapter_config, checked_parameters, preset_name, sizes, trained_runs
from matcomp.book.sweep import collect, grid, run_sweep
from matcomp.book.tables import findings, styled, variant_findings
from matcomp.config import RunConfig
from matcomp.runs.store import runs_root

__all__ = [  # the names its notebook uses
    "READ_AFTER_DROP", "checked_parameters", "collect", "findings", "grid", "preset_name", "run_sweep",
    "runs_root", "setup", "styled", "variant_findings", "variant_summary", "variant_table", "width_loss_ratios",
]


def runs_read(preset: str) -> list[RunConfig]:
    """Every width and depth at the scale's shape seeds."""
    cfg, size = chapter_config(preset), sizes(preset)
    axes = {"width": list(size.widths), "depth": list(size.depths)}
    steps = size.steps("shape_steps", cfg)
    return [seed_cfg.override(change) for seed_cfg in seed_configs(cfg, seeds_from(cfg, size.shape_seeds)).values()
            for change in variant_overrides(seed_cfg, axes, steps, size.after_drop).values()]


def setup(preset: str | None, seed: int | None, overrides: str, widths: list | None, depths: list | None,
          seeds: int | None, steps: int | None, after_drop: int | None):
    """The chapter's config, the runs' budget, each variant's changes and its runs (variant -> seed -> run),
    the chapter's own width and depth, and the depths (None: the preset's); printed."""
    cfg = chapter_config(preset, seed, overrides)
    size = sizes(preset)
    widths, depths = widths or list(size.widths), depths or list(size.depths)
    steps = steps or size.steps("shape_steps", cfg)
    after_drop = size.after_drop if after_drop is None else after_drop
    variants = variant_overrides(cfg, {"width": widths, "depth": depths}, steps, after_drop)
    runs = trained_runs(variant_configs(cfg, variants, seeds_from(cfg, seeds or size.shape_seeds)), preset)
    own = {"width": cfg.model.hidden, "depth": cfg.model.layers}
    print(f"{preset_name(preset)} preset: width {own['width']} and depth {own['depth']} are the chapter's runs; "
          f"every run has lr {cfg.train.lr:g} (the chapter's, at every shape) and up to {steps:,} steps"
          + (f", stopping {after_drop:,} steps after its drop" if after_drop else ""))
    return cfg, steps, variants, runs, own, depths
