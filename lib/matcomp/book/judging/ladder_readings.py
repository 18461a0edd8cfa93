"""The ladders read from runs: a one-model chapter's key numbers (``finding_ladders``) and the sudden drop's
(``drop_ladders``) on every seed of each task of the size ladder and on the single runs above it, each made into a
``matcomp.book.judging.ladder.Ladder``, which judges and shows them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from matcomp.analysis.key_numbers import Estimate
from matcomp.analysis.phases import Phases
from matcomp.analysis.seeds import trained_on
from matcomp.book.judging.ladder import (
    DEPTH,
    FINISHED,
    OWN_RECIPE,
    Ladder,
    read_on_none,
    stopped_short,
    unread_reason,
)
from matcomp.book.spec import ChapterSpec, KeyNumber
from matcomp.runs.run import Run

Numbers = Mapping[str, Estimate]  # one run's key numbers: id -> estimate


def _ladder(what: str, numbers: tuple[KeyNumber, ...], rows: Mapping[str, Mapping[int, Numbers]],
            steps: dict[str, dict[int, int]], unread: dict[str, dict[str, dict[int, str]]],
            beyond: Mapping[str, Numbers], beyond_unread: dict[str, dict[str, str]],
            apart: dict[str, str] | None = None,
            runs: Mapping[str, Mapping[int, Run]] | None = None, singles: Mapping[str, Run] | None = None) -> Ladder:
    """A ``Ladder`` of ``numbers`` from each task's estimates seed by seed (``rows``: task -> seed -> id ->
    estimate; smallest task first; the largest is judged), their steps and the numbers each seed cannot read
    (task -> id -> seed -> why); ``apart``: what the numbers shown apart are, beyond the declared checks (id ->
    what); ``runs`` (task -> seed -> run) and ``singles`` (each run above the ladder by its label in ``beyond``)
    say where each trained and stopped. A drawn number (a drop step) is shown apart on the ladder's tasks, which
    train by their own recipe, and judged on the runs above it."""
    keys = [number.id for number in numbers]
    apart = {**{number.id: number.check for number in numbers if number.check}, **(apart or {})}
    recipe = {number.id: OWN_RECIPE for number in numbers if number.claim.drawn}
    tasks = {}
    for label, seeds in rows.items():
        table = _values(seeds, keys)
        for key, why in unread[label].items():
            table.loc[list(why), key] = float("nan")
        judged = [k for k in keys if k not in apart] or keys
        read = table.drop(index=read_on_none(seeds, unread[label], judged))
        name = (f"{label}, seed {next(iter(seeds))}, step {steps[label][next(iter(seeds))]:,}" if len(seeds) == 1
                else f"{label}, mean of {len(read)} read of {len(seeds)} seeds")
        tasks[name] = pd.Series({key: read.loc[[s for s in read.index if s not in unread[label].get(key, {})], key]
                                 .mean(skipna=False) for key in keys})  # a seed without the number: no mean
    task = list(rows)[-1]
    judged_runs, singles = (runs or {}).get(task, {}), singles or {}
    dropped = tuple(seed for seed, run in judged_runs.items() if run.drop.half_step is not None)
    return Ladder(what, {number.id: number for number in numbers}, pd.DataFrame(tasks).T, task,
                  _values(rows[task], keys), steps[task], unread[task], _values(rows[task], keys, "se"), dropped,
                  _values(beyond, keys), beyond_unread, _values(beyond, keys, "se"), apart, recipe,
                  {f"{label} seed {seed}": trained_on(run.summary) for label, seeds in (runs or {}).items()
                   for seed, run in seeds.items()}, {place: _one_seed(run) for place, run in singles.items()},
                  {seed: at for seed, run in judged_runs.items() if (at := stopped_short(run))},
                  {place: at for place, run in singles.items() if (at := stopped_short(run))})


def _values(numbers: Mapping[Any, Numbers], keys: list[str], field: str = "value") -> pd.DataFrame:
    """One ``field`` of each row's estimates (row -> id -> ``Estimate``), a row each and a column an id (NaN
    where a row has no such number)."""
    nan = Estimate(float("nan"))
    return pd.DataFrame({key: {row: getattr(values.get(key, nan), field) for row, values in numbers.items()}
                         for key in keys}, index=list(numbers), columns=keys).astype(float)


def finding_ladders(chapter: ChapterSpec, runs: Mapping[str, Mapping[int, tuple[Run, Phases | None]]], params: dict,
                    beyond: Mapping[str, tuple[Run, Phases]] | None = None) -> Ladder:
    """A one-model chapter's ladder (its ``ChapterSpec.key_numbers``) on ``runs`` (task label -> seed
    -> run and its phases, None where it was kept with its metrics alone; smallest task first) and the single
    runs of ``beyond`` (the paper-scale run, ``chapter.paper_scale_configs``), read with the chapter's parameters
    ``params``, each run at its own post-shift step (a stored derivation, shipped for the default build); a
    seed without a drop is read on the numbers of its pre-shift model alone (``KeyNumber.pre_shift``). The
    first key number is how far below its plateau each run ends (``DEPTH``, judged on the sudden drop's page
    only): a number that holds on a deeper run and not on a shallower one points to an unfinished model."""
    spec = chapter.judged_numbers()
    if spec.metrics_only:
        raise ValueError(f"the {chapter.name} chapter's key numbers are read on metrics alone: drop_ladders")
    ids = [number.id for number in spec.numbers]
    if DEPTH.id in ids:
        raise ValueError(f"the {chapter.name} chapter declares a key number {DEPTH.id!r}: every ladder shows its own")
    pre_shift = [number.id for number in spec.numbers if number.pre_shift]

    def read(run: Run, phases: Phases | None) -> tuple[dict[str, Estimate], dict[str, str]]:
        """A run's numbers, and why it cannot read the others (id -> why)."""
        why = unread_reason(run, phases)
        readable = [] if phases is None else ids if why is None else pre_shift
        numbers = chapter.read_key_numbers(run, phases, params) if readable and phases is not None else {}
        kept = {key: numbers[key] for key in readable}
        return {DEPTH.id: Estimate(run.drop.factor), **kept}, {key: why for key in ids if key not in readable and why}

    rows: dict[str, dict[int, dict[str, Estimate]]] = {}
    steps: dict[str, dict[int, int]] = {}
    unread: dict[str, dict[str, dict[int, str]]] = {}  # task -> key number -> seed -> why
    for label, seeds in runs.items():
        read_seeds = {seed: read(run, phases) for seed, (run, phases) in seeds.items()}
        rows[label] = {seed: numbers for seed, (numbers, _) in read_seeds.items()}
        unread[label] = _by_number({seed: whys for seed, (_, whys) in read_seeds.items()})
        steps[label] = {seed: run.last_step if phases is None else phases.post if phases.dropped else phases.pre
                        for seed, (run, phases) in seeds.items()}
    singles = {_single(label, run, phases.post): (run, phases) for label, (run, phases) in (beyond or {}).items()}
    above = {place: read(run, phases) for place, (run, phases) in singles.items()}
    return _ladder(_what(chapter), (DEPTH, *spec.numbers), rows, steps, unread,
                   {label: numbers for label, (numbers, _) in above.items()},
                   {label: whys for label, (_, whys) in above.items() if whys}, {DEPTH.id: FINISHED},
                   {label: {seed: run for seed, (run, _) in seeds.items()} for label, seeds in runs.items()},
                   singles={place: run for place, (run, _) in singles.items()})


def _by_number(whys: Mapping[int, Mapping[str, str]]) -> dict[str, dict[int, str]]:
    """Why each seed cannot read some of its numbers (seed -> key number -> why), by key number (key number ->
    seed -> why), as a ladder's ``unread`` holds it.

    >>> _by_number({0: {}, 1: {"post": "no drop"}, 2: {"post": "no drop", "pre": "kept with its metrics alone"}})
    {'post': {1: 'no drop', 2: 'no drop'}, 'pre': {2: 'kept with its metrics alone'}}
    """
    by: dict[str, dict[int, str]] = {}
    for seed, reasons in whys.items():
        for key, why in reasons.items():
            by.setdefault(key, {})[seed] = why
    return by


def _what(chapter: ChapterSpec) -> str:
    """What a chapter's ladder holds, as its task table's caption says it."""
    return f"the {chapter.name.replace('_', ' ')} key numbers"


def _single(label: str, run: Run, step: int) -> str:
    """A single run's label above the ladder: its task and where it trained, its seed and the step read."""
    return f"{label}, seed {run.config.train.seed}, step {step:,}"


def _one_seed(run: Run) -> str:
    """A single run's column in the verdict table: its task and preset, whichever machine trained it, and where
    it stopped if that is short of its budget (a clock stopped it), since its loss-dependent numbers are then read
    before the end.

    >>> from types import SimpleNamespace as N
    >>> cfg = N(data=N(n_rows=7, n_cols=7, rank=2), name="paper", train=N(steps=50_000))
    >>> _one_seed(N(config=cfg, last_step=29_000)), _one_seed(N(config=cfg, last_step=50_000))
    ('7×7 rank 2 (paper), one seed, stopped at step 29,000 of 50,000', '7×7 rank 2 (paper), one seed')
    """
    d, budget = run.config.data, run.config.train.steps
    stopped = f", stopped at step {run.last_step:,} of {budget:,}" if run.last_step < budget else ""
    return f"{d.n_rows}×{d.n_cols} rank {d.rank} ({run.config.name}), one seed{stopped}"


def drop_ladders(chapter: ChapterSpec, runs: Mapping[str, Mapping[int, Run]],
                 beyond: Mapping[str, Run] | None = None) -> Ladder:
    """The ladder of a chapter whose key numbers are read on a run's metrics alone (``KeyNumbers.metrics_only``:
    the sudden drop's) on ``runs`` (task label -> seed -> run, smallest task first) and the single runs of
    ``beyond`` (label -> run: larger tasks read on their metrics alone, ``chapter.paper_task_runs``). Every
    seed is read: a seed without a drop has no drop step, a later draw than it trained to, which its spread
    counts; the numbers only a drop has (how sharp it was) cannot be read on it."""
    spec = chapter.judged_numbers()
    if not spec.metrics_only:
        raise ValueError(f"the {chapter.name} chapter's key numbers are read on checkpoints: finding_ladders")

    def unread(numbers: Numbers, run: Run) -> dict[str, str]:
        """The numbers a run without a drop has none of, with why (key number -> why)."""
        why = unread_reason(run, None) if run.drop.half_step is None else None
        return {n.id: why for n in spec.numbers if why and not n.claim.drawn and pd.isna(numbers[n.id].value)}

    rows = {label: {seed: spec.read(run) for seed, run in seeds.items()} for label, seeds in runs.items()}
    steps = {label: {seed: run.last_step for seed, run in seeds.items()} for label, seeds in runs.items()}
    whys = {label: _by_number({seed: unread(rows[label][seed], run) for seed, run in seeds.items()})
            for label, seeds in runs.items()}
    singles = {_single(label, run, run.last_step): run for label, run in (beyond or {}).items()}
    above = {place: spec.read(run) for place, run in singles.items()}
    above_unread = {place: missing for place, run in singles.items() if (missing := unread(above[place], run))}
    return _ladder(_what(chapter), spec.numbers, rows, steps, whys, above, above_unread, runs=runs, singles=singles)
