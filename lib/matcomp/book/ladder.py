"""A finding read up the size ladder: the chapter's scale, then the larger tasks of
``ChapterSizes.ladder`` (at ``cpu``: 4×4, 5×5, 7×7), beside the paper's number, with a verdict for each
key number. One table a chapter, so a reader tells an unfinished small model from a real difference; a task
read on several seeds (``ChapterSizes.one_model_seeds``) gives the ladder their mean, and its ``seed_table``
their range."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd
from IPython.display import display

from matcomp.analysis.key_numbers import Side, finding_spec, key_numbers
from matcomp.analysis.phases import Phases
from matcomp.book.tables import findings, styled
from matcomp.data import second_moment
from matcomp.paper import SUDDEN_DROP
from matcomp.presets import preset
from matcomp.runs.run import Run

VERDICTS = ("reproduces", "moves toward the paper as the task grows", "direction only", "does not")


def _distance(value: float, paper: float) -> float:
    """How far ``value`` is from ``paper``: |log ratio| when both are positive, else the relative gap."""
    if value > 0 and paper > 0:
        return abs(math.log(value / paper))
    return abs(value - paper) / abs(paper) if paper else abs(value)


def ladder_verdict(ours: list[float], paper: float | Side, tolerance: float = 0.25,
                   reference: float | None = None) -> str:
    """The verdict on one key number read on the ladder's tasks, smallest first (``ours``; NaN where a
    task has none), against the paper's. Where the paper gives a direction only (a ``Side``), it
    "reproduces" when the largest task's value is on that side, else it "does not". Where it gives a
    number:

    - "reproduces": the largest task's value is within ``tolerance`` of the paper's (in log ratio);
    - "moves toward the paper as the task grows": it is not, but its distance to the paper's shrinks at
      every step up the ladder (two tasks at least);
    - "direction only": every value lies on the paper's side of ``reference`` (1 for a ratio, 0 for a
      difference: the effect is there, not its size);
    - "does not": none of these.

    >>> ladder_verdict([5060, 6812, 16406], 15000), ladder_verdict([4.3, 10.5, 4.4], 17, reference=1)
    ('reproduces', 'direction only')
    >>> ladder_verdict([0.9, 0.5, 0.2], 3.0, reference=1), ladder_verdict([0.5, 2.0], 40, reference=1)
    ('does not', 'moves toward the paper as the task grows')
    >>> ladder_verdict([0.02, 0.3], Side(0.1)), ladder_verdict([0.3, 0.02], Side(0.1))
    ('reproduces', 'does not')
    """
    values = [v for v in ours if not pd.isna(v)]
    if not values:
        return "does not"
    if isinstance(paper, Side):
        return VERDICTS[0] if paper.holds(values[-1]) else VERDICTS[3]
    distances = [_distance(v, paper) for v in values]
    if distances[-1] <= tolerance:
        return VERDICTS[0]
    if len(values) > 1 and all(b < a for a, b in zip(distances, distances[1:])):
        return VERDICTS[1]
    if reference is not None and all((v - reference) * (paper - reference) > 0 for v in values):
        return VERDICTS[2]
    return VERDICTS[3]


def ladder_table(rows: dict[str, dict[str, float]], paper: Mapping[str, float | Side], tolerance: float = 0.25,
                 references: dict[str, float] | None = None) -> pd.DataFrame:
    """One row per task of the ladder (``rows``: label -> key number -> value, smallest task first), then
    the paper's row (a ``Side`` shows as its text) and a "verdict" row (``ladder_verdict`` of each key
    number, with its ``references``).

    >>> t = ladder_table({"4×4": {"drop": 5060.0}, "7×7": {"drop": 16406.0}}, {"drop": 15000.0})
    >>> t.loc["verdict", "drop"], t.loc["paper", "drop"]
    ('reproduces', 15000.0)
    """
    references = references or {}
    table = pd.DataFrame.from_dict(rows, orient="index").reindex(columns=list(paper)).astype(float)
    verdicts = {key: ladder_verdict(table[key].tolist(), paper[key], tolerance, references.get(key))
                for key in paper}
    return pd.concat([table.astype(object), pd.DataFrame([paper, verdicts], index=["paper", "verdict"], dtype=object)])


DEPTH = "× below the plateau"  # how far below its plateau a run ends (``Drop.factor``): how finished it is


def paper_depth() -> float:
    """The paper's depth: its plateau over its final L read as L_mask (L / p_mask: its L_obs is near 0 by
    then), about 17×."""
    return SUDDEN_DROP["L_mask on the plateau"] * preset("paper").data.p_mask / SUDDEN_DROP["final L"]


SPREAD = ("mean", "min", "max")  # the rows a seed table adds after its runs


def seed_table(rows: dict[str, dict[str, float]]) -> pd.DataFrame:
    """Key numbers of one task over its seeds (``rows``: a label per seed -> key number -> value), then
    their mean, min and max; a number missing on any seed (a seed without a drop has no drop step)
    leaves them missing too, since a mean over the seeds that have it would hide the others.

    >>> t = seed_table({"seed 0": {"drop step": 12000.0}, "seed 1": {"drop step": 14000.0}})
    >>> t["drop step"].tolist()
    [12000.0, 14000.0, 13000.0, 12000.0, 14000.0]
    """
    table = pd.DataFrame.from_dict(rows, orient="index").astype(float)
    spread = pd.DataFrame({name: getattr(table, name)(skipna=False) for name in SPREAD}).T
    return pd.concat([table, spread])


def seed_rows(table: pd.DataFrame) -> list[str]:
    """The labels of a ``seed_table``'s runs (its rows before the mean, min and max)."""
    return [label for label in table.index if label not in SPREAD]


def seed_label(seed: int, step: int) -> str:
    """A run's row in a ladder or seed table: its seed and the step it is read at."""
    return f"seed {seed}, step {step:,}"


def _mean_of(seeds: int) -> str:
    """How a task's ladder row says it is the mean of its ``seeds`` runs (its label's ending)."""
    return f"mean of {seeds} seeds"


def _rungs(tables: dict[str, pd.DataFrame]) -> dict[str, dict[str, float]]:
    """Each task's ladder row from its ``seed_table``: its one run (labelled by it), or the mean of its seeds."""
    rows = {}
    for label, table in tables.items():
        runs = seed_rows(table)
        rows[f"{label}, {runs[0]}" if len(runs) == 1 else f"{label}, {_mean_of(len(runs))}"] = \
            table.loc["mean"].to_dict()
    return rows


def drop_seeds(runs: dict[int, Run]) -> pd.DataFrame:
    """``seed_table`` of the sudden drop's key numbers on one task's ``runs`` (seed -> run): the plateau
    against the copying level E[X²] (r/9), the drop step, and how far below its plateau each ends
    (``DEPTH``)."""
    return seed_table({seed_label(seed, run.last_step): {
        "plateau / E[X²]": run.drop.plateau / second_moment(run.config.data),
        "drop step": float("nan") if run.drop.half_step is None else float(run.drop.half_step),
        DEPTH: run.drop.factor} for seed, run in runs.items()})


def drop_ladder(runs: dict[str, dict[int, Run]]) -> pd.DataFrame:
    """``ladder_table`` of the sudden drop (NeurIPS §3, Fig. 2) on ``runs`` (task label -> seed -> run,
    smallest task first; a task of several seeds reads their mean, ``drop_seeds``), against the paper's run
    (``DEPTH`` against ``paper_depth``)."""
    return drop_ladders(runs)[0]


def finding_seeds(finding: str, runs: dict[int, tuple[Run, Phases]], params: dict) -> pd.DataFrame:
    """``seed_table`` of a one-model chapter's key numbers (``matcomp.analysis.key_numbers.FINDINGS``) on one
    task's ``runs`` (seed -> run and its phases), read with the chapter's parameters ``params``, each run at
    its own post-shift step; the first column is how far below its plateau each run ends (``DEPTH``)."""
    return seed_table({seed_label(seed, shift.post): {DEPTH: run.drop.factor,
                                                       **key_numbers(finding, run, shift, params)}
                       for seed, (run, shift) in runs.items()})


def finding_ladder(finding: str, runs: dict[str, dict[int, tuple[Run, Phases]]], params: dict) -> pd.DataFrame:
    """``ladder_table`` of a one-model chapter's key numbers on ``runs`` (task label -> seed -> run and its
    phases, smallest task first; a task of several seeds reads their mean, ``finding_seeds``); each run's
    numbers are a stored derivation, shipped for the default build. The first column is how far below its
    plateau each run ends (``DEPTH``): a number that holds on a deeper run and not on a shallower one points
    to an unfinished model, not to the task."""
    return finding_ladders(finding, runs, params)[0]


def finding_ladders(finding: str, runs: dict[str, dict[int, tuple[Run, Phases]]], params: dict,
                    beyond: dict[str, tuple[Run, Phases]] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A one-model chapter's two tables for ``show_ladder``: ``finding_ladder`` on ``runs`` then on the single
    runs of ``beyond`` (label -> run and phases: the paper-scale run, ``chapter.paper_scale_runs``), and
    ``finding_seeds`` on the largest task of ``runs`` (each task's seeds read once)."""
    spec = finding_spec(finding)
    tables = {label: finding_seeds(finding, seeds, params) for label, seeds in runs.items()}
    seeds = list(tables.values())[-1]
    tables.update({label: finding_seeds(finding, {run.config.train.seed: (run, shift)}, params)
                   for label, (run, shift) in (beyond or {}).items()})
    ladder = ladder_table(_rungs(tables), {DEPTH: paper_depth(), **spec.paper},
                          references={DEPTH: 2.0, **spec.references})
    return ladder, seeds


def drop_ladders(runs: dict[str, dict[int, Run]], beyond: dict[str, Run] | None = None
                 ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The sudden drop's two tables for ``show_ladder``: ``drop_ladder`` on ``runs`` then on the single runs
    of ``beyond`` (label -> run: larger tasks read on their metrics alone, ``chapter.rank_search_drops``), and
    ``drop_seeds`` on the largest task of ``runs`` (each task's seeds read once)."""
    paper = {"plateau / E[X²]": SUDDEN_DROP["L_mask on the plateau"] / second_moment(preset("paper").data),
             "drop step": float(SUDDEN_DROP["drop step"]), DEPTH: paper_depth()}
    tables = {label: drop_seeds(seeds) for label, seeds in runs.items()}
    seeds = list(tables.values())[-1]
    tables.update({label: drop_seeds({run.config.train.seed: run}) for label, run in (beyond or {}).items()})
    ladder = ladder_table(_rungs(tables), paper, references={DEPTH: 2.0})  # a run with the effect drops
    return ladder, seeds


def ladder_text(table: pd.DataFrame) -> pd.DataFrame:
    """A ladder table as text: numbers of 100 or more (steps) in full with thousands separators, others to
    three significant digits, missing ones "—" (a run without a drop has no drop step, a 4×4 task no
    ``separating_mask``); the verdicts and the paper's directions (``Side``) as they are.

    >>> ladder_text(pd.DataFrame({"drop step": [16406.0, float("nan"), "reproduces"]})).iloc[:, 0].tolist()
    ['16,406', '—', 'reproduces']
    """
    def text(value):
        if isinstance(value, (str, Side)):
            return str(value)
        return "—" if pd.isna(value) else f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return table.map(text)


def ladder_findings(table: pd.DataFrame, seeds: pd.DataFrame | None = None) -> list[str]:
    """One sentence per key number of a ``ladder_table``: its verdict, and the largest task's value
    against the paper's (as ``ladder_text`` writes them); with ``seeds``, the ``seed_table`` of the largest
    task read on several seeds, the range over its seeds too (after its mean, where a single run above it
    is the largest task).

    >>> ladder_findings(ladder_table({"4×4": {"drop step": 5060.0}, "7×7": {"drop step": 16406.0}},
    ...                              {"drop step": 15000.0}))
    ['drop step: reproduces (7×7: 16,406; the paper: 15,000).']
    >>> ladder_findings(ladder_table({"7×7, mean of 2 seeds": {"drop step": 13000.0}}, {"drop step": 15000.0}),
    ...                 seed_table({"seed 0": {"drop step": 12000.0}, "seed 1": {"drop step": 14000.0}}))
    ['drop step: reproduces (7×7, mean of 2 seeds: 13,000, seeds 12,000 to 14,000; the paper: 15,000).']
    """
    text = ladder_text(table)
    spread = ladder_text(seeds) if seeds is not None and len(seed_rows(seeds)) > 1 else None
    tasks = [label for label in table.index if label not in ("paper", "verdict")]
    seeded = None if spread is None else next(  # the task the seeds are of: the largest, or one below a single run
        (t for t in reversed(tasks) if t.endswith(_mean_of(len(seed_rows(seeds))))), tasks[-1])
    sentences = []
    for key in table.columns:
        parts = [f"{tasks[-1]}: {text.loc[tasks[-1], key]}"]
        if spread is not None and key in spread:
            parts += [] if seeded == tasks[-1] else [f"{seeded}: {text.loc[seeded, key]}"]
            parts[-1] += f", seeds {spread.loc['min', key]} to {spread.loc['max', key]}"
        sentences.append(f"{key}: {table.loc['verdict', key]} ({'; '.join(parts)}; "
                         f"the paper: {text.loc['paper', key]}).")
    return sentences


def show_ladder(ladder: pd.DataFrame, seeds: pd.DataFrame, what: str = "the key numbers") -> None:
    """A chapter's ladder section: the largest task's runs seed by seed with their mean, min and max (when it
    has several), the ladder (``ladder_text``), then one sentence per key number (``ladder_findings``).
    Both tables show one key number a row, so a finding reads across the sizes to its verdict, and a chapter
    with many key numbers grows down the page, not off its side."""
    if len(seed_rows(seeds)) > 1:
        display(styled(ladder_text(seeds).T, "{}",
                       f"{what} on each seed of the largest task read on several, their mean, min and max"))
    display(styled(ladder_text(ladder).T, "{}", f"{what} on each task of the ladder, the paper's and the verdict"))
    display(findings(*ladder_findings(ladder, seeds)))
