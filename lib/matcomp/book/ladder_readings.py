"""The ladders read from runs: a one-model chapter's key numbers (``finding_ladders``) and the sudden drop's
(``drop_ladders``) on every seed of each task of the size ladder and on the single runs above it, each made into a
``matcomp.book.ladder.Ladder``, which judges and shows them."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from matcomp.analysis.key_numbers import SE
from matcomp.analysis.phases import Phases
from matcomp.analysis.seeds import trained_on
from matcomp.book.ladder import (
    COPYING,
    DEPTH,
    FINISHED,
    OWN_RECIPE,
    Ladder,
    depth_derivation,
    paper_depth,
    read_on_none,
    stopped_short,
    unread_reason,
)
from matcomp.book.spec import ChapterSpec
from matcomp.book.verdicts import CHECK, GROWS, Claim
from matcomp.data import second_moment
from matcomp.paper import SUDDEN_DROP
from matcomp.presets import preset
from matcomp.runs.run import Run


def _ladder(what: str, claims: dict[str, Claim], rows: dict[str, dict[int, dict[str, float]]],
            steps: dict[str, dict[int, int]], unread: dict[str, dict[str, dict[int, str]]],
            beyond: dict[str, dict[str, float]], beyond_unread: dict[str, dict[str, str]],
            apart: dict[str, str] | None = None,
            runs: Mapping[str, Mapping[int, Run]] | None = None, recipe: dict[str, str] | None = None,
            singles: Mapping[str, Run] | None = None) -> Ladder:
    """A ``Ladder`` from each task's numbers seed by seed (``rows``: task -> seed -> key number -> value, and
    its standard error under ``<key> s.e.``; smallest task first; the largest is judged), their steps and the
    numbers each seed cannot read (task -> key number -> seed -> why); ``runs`` (task -> seed -> run) and
    ``singles`` (each run above the ladder by its label in ``beyond``) say where each trained and stopped."""
    tasks = {}
    for label, seeds in rows.items():
        table = pd.DataFrame.from_dict(seeds, orient="index").reindex(columns=list(claims)).astype(float)
        for key, why in unread[label].items():
            table.loc[list(why), key] = float("nan")
        judged = [k for k in claims if k not in (apart or {})] or list(claims)
        read = table.drop(index=read_on_none(seeds, unread[label], judged))
        name = (f"{label}, seed {next(iter(seeds))}, step {steps[label][next(iter(seeds))]:,}" if len(seeds) == 1
                else f"{label}, mean of {len(read)} read of {len(seeds)} seeds")
        tasks[name] = pd.Series({key: read.loc[[s for s in read.index if s not in unread[label].get(key, {})], key]
                                 .mean(skipna=False) for key in claims})  # a seed without the number: no mean
    task = list(rows)[-1]
    seeds = pd.DataFrame.from_dict(rows[task], orient="index").reindex(columns=list(claims)).astype(float)
    errors = _error_table(rows[task], claims)
    judged_runs, singles = (runs or {}).get(task, {}), singles or {}
    dropped = tuple(seed for seed, run in judged_runs.items() if run.drop.half_step is not None)
    beyond_table = pd.DataFrame.from_dict(beyond, orient="index")
    return Ladder(what, claims, pd.DataFrame(tasks).T, task, seeds, steps[task], unread[task], errors, dropped,
                  beyond_table.reindex(columns=list(claims)).astype(float), beyond_unread,
                  _error_table(beyond, claims), apart or {}, recipe or {},
                  {f"{label} seed {seed}": trained_on(run.summary) for label, seeds in (runs or {}).items()
                   for seed, run in seeds.items()}, {place: _one_seed(run) for place, run in singles.items()},
                  {seed: at for seed, run in judged_runs.items() if (at := stopped_short(run))},
                  {place: at for place, run in singles.items() if (at := stopped_short(run))})


def _error_table(numbers: Mapping, claims: Mapping[str, Claim]) -> pd.DataFrame:
    """The standard errors among ``numbers`` (row -> key number or ``<key> s.e.`` -> value), by key number."""
    return pd.DataFrame({key: {row: values.get(key + SE, float("nan")) for row, values in numbers.items()}
                         for key in claims}, index=list(numbers), columns=list(claims)).astype(float)


def finding_ladders(chapter: ChapterSpec, runs: Mapping[str, Mapping[int, tuple[Run, Phases | None]]], params: dict,
                    beyond: Mapping[str, tuple[Run, Phases]] | None = None) -> Ladder:
    """A one-model chapter's ladder (its ``ChapterSpec.key_numbers``) on ``runs`` (task label -> seed
    -> run and its phases, None where it was kept with its metrics alone; smallest task first) and the single
    runs of ``beyond`` (the paper-scale run, ``chapter.paper_scale_runs``), read with the chapter's parameters
    ``params``, each run at its own post-shift step (a stored derivation, shipped for the default build); a
    seed without a drop is read on the numbers of its pre-shift model alone (``KeyNumbers.pre_shift``). The
    first key number is how far below its plateau each run ends (``DEPTH``, judged on the sudden drop's page
    only): a number that holds on a deeper run and not on a shallower one points to an unfinished model."""
    spec = chapter.key_numbers
    if spec is None:
        raise ValueError(f"the {chapter.name} chapter judges no key numbers; its ladder is the drop's")
    claims = {DEPTH: drop_claims()[DEPTH], **spec.claims}  # DEPTH: how finished each run is; judged with the drop

    def read(run: Run, phases: Phases | None) -> tuple[dict[str, float], dict[str, str]]:
        """A run's numbers, and why it cannot read the others (key number -> why)."""
        why = unread_reason(run, phases)
        readable = [] if phases is None else list(spec.claims) if why is None else list(spec.pre_shift)
        numbers = chapter.read_key_numbers(run, phases, params) if readable and phases is not None else {}
        kept = {key: value for key, value in numbers.items() if key.removesuffix(SE) in readable}
        return {DEPTH: run.drop.factor, **kept}, {key: why for key in spec.claims if key not in readable and why}

    rows: dict[str, dict[int, dict[str, float]]] = {}
    steps: dict[str, dict[int, int]] = {}
    unread: dict[str, dict[str, dict[int, str]]] = {}  # task -> key number -> seed -> why
    for label, seeds in runs.items():
        read_seeds = {seed: read(run, phases) for seed, (run, phases) in seeds.items()}
        rows[label] = {seed: numbers for seed, (numbers, _) in read_seeds.items()}
        unread[label] = {}
        for seed, (_, whys) in read_seeds.items():
            for key, why in whys.items():
                unread[label].setdefault(key, {})[seed] = why
        steps[label] = {seed: run.last_step if phases is None else phases.post if phases.dropped else phases.pre
                        for seed, (run, phases) in seeds.items()}
    singles = {_single(label, run, phases.post): (run, phases) for label, (run, phases) in (beyond or {}).items()}
    above = {place: read(run, phases) for place, (run, phases) in singles.items()}
    return _ladder(f"the {chapter.name.replace('_', ' ')} key numbers", claims, rows, steps, unread,
                   {label: numbers for label, (numbers, _) in above.items()},
                   {label: whys for label, (_, whys) in above.items() if whys},
                   {DEPTH: FINISHED, **{key: CHECK for key in spec.checks}},
                   {label: {seed: run for seed, (run, _) in seeds.items()} for label, seeds in runs.items()},
                   singles={place: run for place, (run, _) in singles.items()})


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


def drop_claims() -> dict[str, Claim]:
    """The sudden drop's key numbers as the paper gives them (NeurIPS §3, Fig. 2): its plateau against the
    copying level E[X²], its drop step and how far below its plateau it ends."""
    return {"plateau / E[X²]": Claim(SUDDEN_DROP["L_mask on the plateau"] / second_moment(preset("paper").data)),
            "drop step": Claim(float(SUDDEN_DROP["drop step"]), drawn=True),  # one draw, as the paper's is
            DEPTH: Claim(paper_depth(), 2.0, training=GROWS, derived=depth_derivation())}  # below half: dropped


def _drop_numbers(run: Run) -> dict[str, float]:
    return {"plateau / E[X²]": run.drop.plateau / second_moment(run.config.data),
            "drop step": float("nan") if run.drop.half_step is None else float(run.drop.half_step),
            DEPTH: run.drop.factor}


def drop_ladders(runs: Mapping[str, Mapping[int, Run]], beyond: Mapping[str, Run] | None = None) -> Ladder:
    """The sudden drop's ladder on ``runs`` (task label -> seed -> run, smallest task first) and the single runs
    of ``beyond`` (label -> run: larger tasks read on their metrics alone, ``chapter.rank_search_drops``). Every
    seed can be read: a seed without a drop has no drop step, which counts against the claim."""
    rows = {label: {seed: _drop_numbers(run) for seed, run in seeds.items()} for label, seeds in runs.items()}
    steps = {label: {seed: run.last_step for seed, run in seeds.items()} for label, seeds in runs.items()}
    singles = {_single(label, run, run.last_step): run for label, run in (beyond or {}).items()}
    return _ladder("the sudden drop", drop_claims(), rows, steps, {label: {} for label in runs},
                   {place: _drop_numbers(run) for place, run in singles.items()}, {}, {"plateau / E[X²]": COPYING},
                   runs, {"drop step": OWN_RECIPE}, singles)
