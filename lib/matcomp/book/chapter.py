"""What every chapter of the book does first: turn its papermill parameters into a run config, get
the run, and pick the checkpoints it analyses from the run's own drop (``open_chapter``, one line); and the one way
every part opens runs (``open_runs``), the run sets being configurations (``ladder_configs``, ...).

A chapter's ``parameters`` cell holds literals (``preset = None``, ``seed = None``, ``overrides = ""``);
``chapter_config`` resolves ``None`` from the environment, so that one variable switches every
chapter (``MATCOMP_PRESET=smoke`` in CI), and papermill's ``-p preset smoke -p seed 3`` switches one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Literal, NamedTuple, TypeVar, overload

import torch

from matcomp.analysis.phases import Phases, phases
from matcomp.analysis.seeds import seed_configs, seeds_at, trained_on
from matcomp.book.phase_notes import phase_note
from matcomp.config import RunConfig
from matcomp.console import say
from matcomp.drop import PLATEAU_FROM
from matcomp.overrides import parse_overrides
from matcomp.presets import PRESETS, preset_config, preset_name, resolved_config
from matcomp.runs.cost import CostBook, duration, step_floor
from matcomp.runs.run import Run
from matcomp.runs.shipped import find_reference
from matcomp.runs.store import (
    Location,
    RunError,
    get_or_train,
    locate,
    runs_root,
    training_forbidden,
    writable_store,
)
from matcomp.runs.training import resolve_device
from matcomp.sizes import chapter_sizes

ENV_MAX_TRAIN_MIN = "MATCOMP_MAX_TRAIN_MIN"  # minutes a chapter may train here; beyond, it refuses
DEFAULT_MAX_TRAIN_MIN = 120.0  # where it is unset: the book's longest CPU run (cpu7x7), not a surprise of hours


def model_preset(preset: str | None = None, one_model: str | None = None) -> str:
    """The preset of the one trained model a chapter analyses: ``one_model`` if given, else the one its
    scale names (``cpu`` -> ``cpu7x7``: the mechanisms need more than 4×4's 16 positions), else the
    scale itself. The chapters' several-seed parts stay at the scale's own preset."""
    if one_model is not None:
        bert = sorted(name for name, cfg in PRESETS.items() if cfg.model.arch == "bert")
        if one_model not in bert:
            raise ValueError(f"one_model: the one-model chapters analyse a trained BERT, one of the presets {bert}; "
                             f"got {one_model!r}")
        return one_model
    return chapter_sizes(preset).one_model or preset_name(preset)


def chapter_config(preset: str | None = None, seed: int | None = None,
                   overrides: str | dict | None = None, variant: str = "") -> RunConfig:
    """The run config of a chapter's parameters (``matcomp.presets.resolved_config``).

    ``preset`` None -> ``$MATCOMP_PRESET``, else ``cpu``; ``seed`` None -> ``$MATCOMP_SEED``, else the
    preset's; ``overrides`` (a dict or ``"field=value,..."``) are applied after those of ``$MATCOMP_SET``.
    A ``variant`` ("gpt") takes the scale's GPT preset (``ChapterSizes.gpt``: ``cpu`` -> ``cpu_gpt``). A BERT
    run too short to have a plateau is refused before it trains, and a ``$MATCOMP_MAX_TRAIN_MIN`` that is not a
    number of minutes before any work (it is read only where a run must train, maybe minutes later).
    """
    _max_train_minutes()
    name = preset_name(preset)
    if variant not in ("", "gpt"):
        raise ValueError(f"variant must be '' or 'gpt'; got {variant!r}")
    if variant and not name.endswith("_gpt"):
        name = chapter_sizes(name).gpt or f"{name}_gpt"
    if overrides is not None and not isinstance(overrides, (str, dict)):
        raise ValueError(f"overrides must be text such as 'train.lr=3e-4, model.hidden=32' or a dict; "
                         f"got {overrides!r}")
    changes: dict[str, object] = {}
    try:
        changes.update(parse_overrides(overrides) if isinstance(overrides, str) else overrides or {})
    except ValueError as err:
        raise ValueError(f"overrides: {err}") from None
    if seed is not None:
        changes["train.seed"] = seed
    cfg = resolved_config(name, changes)
    if cfg.model.arch == "bert" and cfg.train.steps <= PLATEAU_FROM:  # refused before it trains
        raise ValueError(f"train.steps must be > {PLATEAU_FROM} for a chapter: a run's plateau is read after step "
                         f"{PLATEAU_FROM} (matcomp.drop); got {cfg.train.steps}")
    return cfg


def check_environment(preset: str | None = None) -> None:
    """Refuse, in a chapter's first cell, what the environment gives wrongly: ``$MATCOMP_PRESET``, ``$MATCOMP_SET``,
    ``$MATCOMP_SEED`` and ``$MATCOMP_MAX_TRAIN_MIN``, as ``chapter_config`` reads them for ``preset``."""
    chapter_config(preset)


def probing_config(preset: str | None = None, seed: int | None = None,
                   overrides: str | dict | None = None) -> RunConfig | None:
    """The deeper analogue of the chapter's run that the probes also read (NeurIPS Fig. 6 probes a 12-layer
    model): its preset's ``probe_layers`` layers at half the learning rate, as the paper halves it for
    its 12-layer model; None where the preset has none (``paper12`` is itself that model)."""
    layers = chapter_sizes(preset).probe_layers
    if layers is None:
        return None
    cfg = chapter_config(preset, seed, overrides)
    return cfg.override({"model.layers": layers, "train.lr": cfg.train.lr / 2})


K = TypeVar("K")
J = TypeVar("J")
MetricsOnly = Literal["read", "train"]


class Opened(NamedTuple):
    """A run a chapter reads its checkpoints from, and its phases: None for those of a run shipped with its metrics
    alone and read as it is (``open_runs``' ``metrics_only="read"``)."""

    run: Run
    phases: Phases | None


# where phases are asked with metrics_only="train", every run has them: typed (Run, Phases)
@overload
def open_runs(configs: Mapping[K, RunConfig], preset: str | None = None, *, with_phases: Literal[False] = False,
              metrics_only: MetricsOnly = "read") -> dict[K, Run]: ...
@overload
def open_runs(configs: Mapping[K, RunConfig], preset: str | None = None, *, with_phases: Literal[True],
              metrics_only: Literal["read"] = "read") -> dict[K, Opened]: ...
@overload
def open_runs(configs: Mapping[K, RunConfig], preset: str | None = None, *, with_phases: Literal[True],
              metrics_only: Literal["train"]) -> dict[K, tuple[Run, Phases]]: ...
@overload
def open_runs(configs: Mapping[K, Mapping[J, RunConfig]], preset: str | None = None, *,
              with_phases: Literal[False] = False, metrics_only: MetricsOnly = "read") -> dict[K, dict[J, Run]]: ...
@overload
def open_runs(configs: Mapping[K, Mapping[J, RunConfig]], preset: str | None = None, *, with_phases: Literal[True],
              metrics_only: Literal["read"] = "read") -> dict[K, dict[J, Opened]]: ...
def open_runs(configs, preset=None, *, with_phases=False, metrics_only="read"):
    """The runs of ``configs`` (any keys: seeds, arms, variants, tasks; or a mapping of such mappings, as a ladder's
    tasks and seeds), keys kept: the one way the chapters open runs. Each is shipped, stored or trained; those
    that must train are announced first as a whole (and refused where the whole is beyond
    ``$MATCOMP_MAX_TRAIN_MIN``), then each as it starts, with its progress.

    - ``with_phases``: each run with its phases (``Opened``), for a part that reads checkpoints; without, the runs
      alone, for the analyses that read their metrics (a run shipped with its metrics alone is read as it is).
    - ``metrics_only``: where phases are asked, what becomes of a run shipped with its metrics alone: ``"read"``
      as it is, with None for its phases (a seed of a several-seed part: counted, not trained to be read), or
      ``"train"`` into the store, to read its checkpoints (a chapter's own run).
    """
    if metrics_only not in ("read", "train"):
        raise ValueError(f"metrics_only must be 'read' or 'train'; got {metrics_only!r}")
    train_shipped = with_phases and metrics_only == "train"
    located = _nested(configs, locate)  # once a run: the whole announced, then each
    announce_runs(_leaves(located), preset, train_shipped)
    return _nested(located, lambda where: _opened(where, preset, with_phases, train_shipped))


def _nested(tree: Mapping, leaf: Callable) -> dict:
    """``tree`` (a mapping whose values are leaves or such mappings) with ``leaf`` applied to each leaf."""
    return {key: _nested(value, leaf) if isinstance(value, Mapping) else leaf(value) for key, value in tree.items()}


def _leaves(tree: Mapping) -> Iterator:
    """Every leaf of ``tree`` (as ``_nested`` reads it), in order."""
    for value in tree.values():
        yield from _leaves(value) if isinstance(value, Mapping) else (value,)


@overload
def open_run(cfg: RunConfig, preset: str | None = None, *, with_phases: Literal[False] = False,
             metrics_only: MetricsOnly = "read") -> Run: ...
@overload
def open_run(cfg: RunConfig, preset: str | None = None, *, with_phases: Literal[True],
             metrics_only: Literal["read"] = "read") -> Opened: ...
@overload
def open_run(cfg: RunConfig, preset: str | None = None, *, with_phases: Literal[True],
             metrics_only: Literal["train"]) -> tuple[Run, Phases]: ...
def open_run(cfg, preset=None, *, with_phases=False, metrics_only="read"):
    """``open_runs`` of the one config ``cfg``."""
    return open_runs({0: cfg}, preset, with_phases=with_phases, metrics_only=metrics_only)[0]


def _metrics_alone(where: Location) -> bool:
    """Whether the run ``where`` locates is shipped with its metrics alone, no checkpoint."""
    return where.reference is not None and not where.reference.steps


def _opened(where: Location, preset: str | None, with_phases: bool, train_shipped: bool) -> Run | Opened:
    """The run ``where`` locates, as ``open_runs`` opens it (``train_shipped``: a run shipped with its metrics alone
    is trained for its checkpoints)."""
    reference = where.reference if _metrics_alone(where) else None
    if with_phases and reference is not None and not train_shipped:
        return Opened(reference, None)
    use_shipped = not (train_shipped and _metrics_alone(where))
    needed = announce_training(where, preset, use_shipped)
    run = get_or_train(where.cfg, progress="text" if needed else False, shipped=use_shipped, location=where)
    return Opened(run, phases(run)) if with_phases else run


def steps_to_train(where: Location, shipped: bool = True) -> int:
    """Steps the run ``where`` locates must train here before a chapter can read it (0: shipped, where ``shipped``
    allows, or stored; or training is forbidden, which ``get_or_train`` then reports)."""
    state, done = where.state(shipped)
    if state in ("shipped", "stored") or training_forbidden():
        return 0
    return where.cfg.train.steps - done


def training_seconds(cfg: RunConfig, steps: int, preset: str | None, what: str,
                     costs: CostBook | None = None) -> tuple[float, float]:
    """Seconds ``steps`` steps of ``cfg`` take here and a step's seconds (timed here, ``CostBook.measure``, in
    ``costs`` if given), after refusing (``RunError``) what is beyond ``$MATCOMP_MAX_TRAIN_MIN`` (else
    ``DEFAULT_MAX_TRAIN_MIN``) minutes, at once where even its fastest step (``step_floor``: a preset meant for a
    GPU, asked of a CPU) is beyond it, before a step is timed. ``what``: the training the refusal names."""
    device, limit = resolve_device(None), _max_train_minutes()
    floor = step_floor(cfg, device) * steps
    if floor > 60 * limit:
        raise RunError(f"{what} would train {steps:,} steps here, at least {duration(floor)} on this {device.type} "
                       f"(its fastest step, from its FLOPs: {floor / steps:.3g} s), beyond {_limit_text(limit)}: "
                       f"{_instead(preset)}")
    costs = costs or CostBook(writable_store(), device, torch.get_num_threads())
    step = costs.measure(cfg, steps=5, warmup=2).seconds
    if step * steps > 60 * limit:
        raise RunError(f"{what} would train {steps:,} steps here, about {duration(step * steps)} ({step:.3g} s a "
                       f"step, timed here), beyond {_limit_text(limit)}: {_instead(preset)}")
    return step * steps, step


def _limit_text(limit: float) -> str:
    source = f"${ENV_MAX_TRAIN_MIN}" if os.environ.get(ENV_MAX_TRAIN_MIN, "").strip() else "the chapters' default"
    return f"{source} = {limit:g} minutes (set ${ENV_MAX_TRAIN_MIN} to allow more)"


def _instead(preset: str | None) -> str:
    return (f"use a shipped model (-p one_model cpu), or train the book's runs first (python -m matcomp prepare "
            f"--preset {preset_name(preset)})")


def announce_training(where: Location, preset: str | None = None, shipped: bool = True) -> bool:
    """Say, before it starts, that the run ``where`` locates must train here: which run, why, about how long
    (``training_seconds``, for the steps ``where`` says are left after a resume or a shorter finished run it
    continues), and the alternatives; in a notebook kernel the same line goes to the console that started it
    (papermill's) too. False if it need not train (``steps_to_train``)."""
    cfg, steps = where.cfg, steps_to_train(where, shipped)
    if not steps:
        return False
    why = ("it is shipped with its metrics alone (no checkpoint to analyse) and is not" if where.reference is not None
           else "it is neither shipped nor")
    seconds, step = training_seconds(cfg, steps, preset, f"run {cfg.run_id}")
    say(f"Training run {cfg.run_id} ({steps:,} steps, about {duration(seconds)} on this "
         f"{resolve_device(None).type}, {step:.3g} s a step timed here): {why} in the run store {runs_root()}. "
         f"Instead: a shipped model (-p one_model cpu for the one-model chapters), or train the book's runs in "
         f"parallel first with python -m matcomp prepare --preset {preset_name(preset)}; ${ENV_MAX_TRAIN_MIN} "
         "bounds it.")
    return True


def announce_runs(located: Iterable[Location], preset: str | None = None, train_shipped: bool = False) -> None:
    """Before a several-run part trains any of the runs ``located`` (their ``locate``): how many must train here and
    about how long in all, refused (``training_seconds``) where the whole is beyond the bound, so a large ``seeds``
    is refused before its first run rather than announced run by run. ``train_shipped``: a run shipped with its
    metrics alone trains for its checkpoints (``open_runs``)."""
    todo = [(where.cfg, steps) for where in located
            if (steps := steps_to_train(where, not (train_shipped and _metrics_alone(where))))]
    if len(todo) < 2:
        return
    costs = CostBook(writable_store(), resolve_device(None), torch.get_num_threads())  # one for all: shapes repeat
    total = sum(training_seconds(cfg, steps, preset, f"run {cfg.run_id}", costs)[0] for cfg, steps in todo)
    limit = _max_train_minutes()
    if total > 60 * limit:
        raise RunError(f"{len(todo)} runs would train here, about {duration(total)} in all, beyond "
                       f"{_limit_text(limit)}: fewer seeds or arms, or {_instead(preset)}")
    say(f"{len(todo)} runs must train here, about {duration(total)} in all; each is announced as it starts.")


def _max_train_minutes() -> float:
    """``$MATCOMP_MAX_TRAIN_MIN`` as a number of minutes, else ``DEFAULT_MAX_TRAIN_MIN``; anything else is a
    ValueError naming it."""
    text = os.environ.get(ENV_MAX_TRAIN_MIN, "").strip()
    if not text:
        return DEFAULT_MAX_TRAIN_MIN
    try:
        minutes = float(text)
    except ValueError:
        minutes = float("nan")
    if not minutes >= 0:
        raise ValueError(f"${ENV_MAX_TRAIN_MIN} must be a number of minutes >= 0; got {text!r}")
    return minutes


def ladder_configs(preset: str | None = None) -> dict[str, dict[int, RunConfig]]:
    """The runs of the chapter's size ladder: its scale's own run, then those of ``ChapterSizes.ladder``
    (at ``cpu``: 4×4, 5×5, 7×7), smallest first, labelled by task and preset ("5×5 (cpu5x5)"), each at its
    seeds: the one-model preset (``model_preset``) at its ``one_model_seeds``, the others at their own."""
    configs = {}
    for name in (preset_name(preset), *chapter_sizes(preset).ladder):
        cfg = chapter_config(name)
        seeds = one_model_configs(preset) if name == model_preset(preset) else {cfg.train.seed: cfg}
        configs[f"{cfg.data.n_rows}×{cfg.data.n_cols} ({name})"] = seeds
    return configs


def one_model_configs(preset: str | None = None) -> dict[int, RunConfig]:
    """The one-model preset's runs (``model_preset``) at its ``one_model_seeds`` (seed -> config), the
    chapter's own seed first: the runs its ladder reads, and ``prepare`` trains."""
    cfg = chapter_config(model_preset(preset))
    return seed_configs(cfg, seeds_at(cfg, chapter_sizes(preset).one_model_seeds))


def rank_search_configs(scale: str | None = None, as_shipped: bool = False) -> list[RunConfig]:
    """The rank-2 search's runs at this scale (``ChapterSizes.rank_search``): what ``sizes_ranks`` reads and
    ``prepare`` trains; ``as_shipped``, without ``$MATCOMP_SET`` and ``$MATCOMP_SEED`` (the shipped runs that
    prose quoting the default preset reads, whatever a reader sets)."""
    search = chapter_sizes(scale).rank_search
    if as_shipped:
        return [preset_config(name, dict[str, object](parse_overrides(overrides))) for name, overrides in search]
    return [chapter_config(name, overrides=overrides) for name, overrides in search]


def task_label(run: Run) -> str:
    """A run's label on the verdicts' larger tasks: its task, preset and the device it trained on
    ("7×7 rank 2 (paper, trained on NVIDIA H200)")."""
    d = run.config.data
    return f"{d.n_rows}×{d.n_cols} rank {d.rank} ({run.config.name}, trained on {trained_on(run.summary)})"


def rank_search_drops(scale: str | None = None, as_shipped: bool = False) -> dict[str, Run]:
    """The rank-2 search's runs (``rank_search_configs``, opened) that leave their plateau, by ``task_label`` (the
    later of two of one label): at ``cpu`` among them the paper's run, trained on a GPU and shipped with its
    metrics alone."""
    runs = open_runs(dict(enumerate(rank_search_configs(scale, as_shipped))), scale)
    return {task_label(run): run for run in runs.values() if run.drop.half_step is not None}


def paper_scale_configs(preset: str | None = None) -> dict[str, RunConfig]:
    """The run of the paper's scale (``ChapterSizes.paper_scale``) by its ``task_label``, where it is shipped with
    its checkpoints (trained on a lent GPU and brought home by ``matcomp.remote``): the one-model chapters' last
    rung, judged as one seed. Empty where it is not: it is never trained here."""
    spec = chapter_sizes(preset).paper_scale
    run = None if spec is None else find_reference(chapter_config(spec[0], overrides=spec[1]))
    return {task_label(run): run.config} if run is not None and run.steps else {}


def open_paper_scale(preset: str | None = None) -> dict[str, tuple[Run, Phases]]:
    """The run of the paper's scale (``paper_scale_configs``) opened with its phases, by its label: what the ladders,
    the paper-model figures and the shipped key numbers read; empty where the scale ships none."""
    return open_runs(paper_scale_configs(preset), preset, with_phases=True, metrics_only="train")


def paper_task_runs(preset: str | None = None) -> list[tuple[str, Run]]:
    """Every run of the paper's own task shipped at this scale, by ``task_label``: the rank-2 search's runs that
    leave their plateau (``rank_search_drops``), then the paper-scale run (``paper_scale_configs``), even where two
    share a label (two trainings of one seed). ``dict`` of it is what the drop's verdicts read: the paper-scale run
    comes last and wins its label, so the verdict table's paper column holds one run, whichever chapter reads it."""
    search = rank_search_drops(preset)
    paper = open_runs(paper_scale_configs(preset), preset)
    return [*search.items(), *((label, run) for label, run in paper.items()
                               if all(run.path != other.path for other in search.values()))]


def open_chapter(preset: str | None = None, seed: int | None = None, overrides: str | dict | None = None,
                 variant: str = "") -> tuple[RunConfig, Run, Phases]:
    """A chapter's config, its run (shipped or stored; trained only if neither) and the run's
    phases; prints the phases' note, which says what "pre-" and "post-shift" mean for this run."""
    cfg = chapter_config(preset, seed, overrides, variant)
    run, read = open_run(cfg, preset, with_phases=True, metrics_only="train")
    print(phase_note(run, read))
    return cfg, run, read
