"""Every run the book's chapters need at a preset, known without executing a notebook
(``python -m matcomp plan``; ``prepare`` trains what is missing).

Each chapter's runs come from one function here, built from the library functions the chapter
itself calls with its default parameters: ``seed_configs``, ``component_config``,
``progress_configs``, ``shortening_defaults``, ``variant_overrides``, ``mixture_overrides``, ``gaussian_config``,
``rank_panel_config`` and the preset's ``ChapterSizes``. A test executes every chapter at the
``smoke`` preset after ``prepare`` and checks that none of them trains, so the plan and the
chapters cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from matcomp.analysis.components import component_config
from matcomp.analysis.ood import gaussian_config, rank_panel_config
from matcomp.analysis.progress import progress_configs
from matcomp.analysis.seeds import seed_configs, seeds_from
from matcomp.analysis.shortening import shortening_defaults
from matcomp.analysis.variants import mixture_overrides, variant_overrides
from matcomp.book.chapter import (
    chapter_config,
    one_model_configs,
    preset_name,
    probing_config,
    rank_search_configs,
    sizes,
)
from matcomp.config import RunConfig
from matcomp.models.recipe import COMPONENT_PATTERNS
from matcomp.runs.cost import CostBook
from matcomp.runs.store import run_state


def _model(preset: str) -> list[RunConfig]:
    return list(one_model_configs(preset).values())


def _seeds(preset: str, count: str = "seeds") -> list[RunConfig]:
    cfg = chapter_config(preset)
    return list(seed_configs(cfg, seeds_from(cfg, getattr(sizes(preset), count))).values())


def _drop_seeds(preset: str) -> list[RunConfig]:
    return _seeds(preset, "drop_seeds")


def _model_and_seeds(preset: str) -> list[RunConfig]:
    return _model(preset) + _seeds(preset)


def _sudden_drop(preset: str) -> list[RunConfig]:
    return _model(preset) + _drop_seeds(preset)


def _components(preset: str) -> list[RunConfig]:
    cfg = chapter_config(preset)
    size = sizes(preset)
    steps = size.steps("component_steps", cfg)
    return [cfg] + [component_config(cfg, c, cfg.run_id, steps, size.after_drop) for c in COMPONENT_PATTERNS]


def _shortening(preset: str) -> list[RunConfig]:
    plain = _seeds(preset, "shortening_seeds")
    changes = shortening_defaults(plain[0], sizes(preset).after_drop).values()
    return plain + [c.override(change) for change in changes for c in plain]


def _progress(preset: str) -> list[RunConfig]:
    cfg, size = chapter_config(preset), sizes(preset)
    seeds = seeds_from(cfg, size.progress_seeds + size.alarm_seeds)  # fitted, then held out
    larger = [chapter_config(name) for name in size.ladder]  # the alarm scored on the larger tasks' runs too
    return list(progress_configs(cfg, seeds, size.after_drop).values()) + larger


def _probing(preset: str) -> list[RunConfig]:
    deep = probing_config(preset)
    return _model(preset) + ([deep] if deep is not None else [])


def _gpt(preset: str) -> list[RunConfig]:
    return [chapter_config(preset, variant="gpt"), chapter_config(preset)]


def _variants(cfg: RunConfig, axes: dict[str, list[int]], steps: int, after_drop: int = 0) -> list[RunConfig]:
    return [cfg.override(change) for change in variant_overrides(cfg, axes, steps, after_drop).values()]


def _width_depth(preset: str) -> list[RunConfig]:
    cfg, size = chapter_config(preset), sizes(preset)
    axes = {"width": list(size.widths), "depth": list(size.depths)}
    seeds = seed_configs(cfg, seeds_from(cfg, size.shape_seeds)).values()
    return [c for seed_cfg in seeds for c in _variants(seed_cfg, axes, size.steps("shape_steps", cfg), size.after_drop)]


def _sizes_ranks(preset: str) -> list[RunConfig]:
    cfg, size = chapter_config(preset), sizes(preset)
    mixture = cfg.override(mixture_overrides(list(size.mixture_sizes)))
    mixtures = seed_configs(mixture, seeds_from(cfg, size.seeds)).values()
    axes = {"size": list(size.mixture_sizes), "rank": list(size.ranks)}
    search = rank_search_configs(preset)  # read beside the one-model run
    one_model = [chapter_config(size.one_model)] if size.one_model and search else []
    return [*mixtures, *_variants(cfg, axes, size.steps("size_steps", cfg)), *search, *one_model]


def _ood(preset: str) -> list[RunConfig]:
    cfg, size, uniform = chapter_config(preset), sizes(preset), _seeds(preset)
    gaussian = [gaussian_config(seed_cfg, size.steps("gaussian_steps", cfg), size.after_drop) for seed_cfg in uniform]
    rank_run = rank_panel_config(cfg, cfg.train.steps, size.after_drop)
    return [*uniform, *gaussian, *([rank_run] if rank_run else [])]


# the chapters in the book's order (``_toc.yml``) -> the runs each reads at a preset
CHAPTER_RUNS: dict[str, Callable[[str], list[RunConfig]]] = {
    "task": lambda preset: [],
    "sudden_drop": _sudden_drop,
    "copying_phase": _model,
    "nuclear_norm": _model,
    "observed_entries": _model,
    "attention_patching": _model,
    "head_taxonomy": _model_and_seeds,
    "embeddings": _model_and_seeds,
    "probing": _probing,
    "components": _components,
    "progress": _progress,
    "shortening": _shortening,
    "gpt": _gpt,
    "width_depth": _width_depth,
    "sizes_ranks": _sizes_ranks,
    "ood": _ood,
}


@dataclass(frozen=True)
class PlannedRun:
    """One run of the plan and the chapters that read it."""

    cfg: RunConfig
    chapters: tuple[str, ...]


def plan(preset: str | None = None, chapters: list[str] | None = None) -> list[PlannedRun]:
    """The runs of ``chapters`` (all by default) at ``preset``, each once, in the order the book
    first needs them; a run a component run starts from comes before it."""
    preset = preset_name(preset)
    unknown = sorted(set(chapters or []) - set(CHAPTER_RUNS))
    if unknown:
        raise ValueError(f"chapters must be among {list(CHAPTER_RUNS)}; got {unknown}")
    users: dict[str, list[str]] = {}
    configs: dict[str, RunConfig] = {}
    for chapter in chapters or CHAPTER_RUNS:
        for cfg in CHAPTER_RUNS[chapter](preset):
            configs.setdefault(cfg.run_id, cfg)
            if chapter not in users.setdefault(cfg.run_id, []):
                users[cfg.run_id].append(chapter)
    return [PlannedRun(configs[run_id], tuple(users[run_id])) for run_id in configs]


def plan_table(planned: list[PlannedRun], root: Path, costs: CostBook) -> pd.DataFrame:
    """One row per run: id, chapters, state, steps done and to train, s/step (measured or
    estimated on this device) and the estimated seconds left."""
    rows = []
    for p in planned:
        state, done = run_state(p.cfg, root)
        cost = costs.cost(p.cfg)
        left = p.cfg.train.steps - done
        rows.append({"run": p.cfg.run_id, "chapters": ", ".join(p.chapters), "state": state, "steps": p.cfg.train.steps,
                     "done": done, "s/step": cost.seconds, "s/step is": "measured" if cost.measured else "estimated",
                     "seconds left": left * cost.seconds})
    columns = ["run", "chapters", "state", "steps", "done", "s/step", "s/step is", "seconds left"]
    return pd.DataFrame(rows, columns=columns).set_index("run")  # a chapter that trains nothing: no rows
