"""Every run the book's chapters need at a preset, known without executing a notebook
(``python -m matcomp plan``; ``prepare`` trains what is missing).

Each chapter declares its runs in its own module (``matcomp.book.chapters.<chapter>.CHAPTER.runs``),
built from the library calls the chapter itself makes with its default parameters. A test executes
chapters at the ``smoke`` preset after ``prepare`` and checks that none of them trains, so the plan and
the chapters cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from matcomp.book.chapters import CHAPTERS, chapter_spec
from matcomp.config import RunConfig
from matcomp.presets import preset_name
from matcomp.runs.cost import CostBook, duration
from matcomp.runs.store import locate


@dataclass(frozen=True)
class PlannedRun:
    """One run of the plan and the chapters that read it."""

    cfg: RunConfig
    chapters: tuple[str, ...]


def plan(preset: str | None = None, chapters: list[str] | None = None) -> list[PlannedRun]:
    """The runs of ``chapters`` (all by default) at ``preset``, and those of the default preset that their prose
    quotes (``ChapterSpec.quoted``), each once, in the order the book first needs them; a run a component run
    starts from comes before it."""
    preset = preset_name(preset)
    unknown = sorted(set(chapters or []) - set(CHAPTERS))
    if unknown:
        raise ValueError(f"chapters must be among {list(CHAPTERS)}; got {unknown}")
    users: dict[str, list[str]] = {}
    configs: dict[str, RunConfig] = {}
    for chapter in chapters or CHAPTERS:
        spec = chapter_spec(chapter)
        for cfg in [*spec.runs(preset), *(spec.quoted() if spec.quoted else [])]:
            configs.setdefault(cfg.run_id, cfg)
            if chapter not in users.setdefault(cfg.run_id, []):
                users[cfg.run_id].append(chapter)
    return [PlannedRun(configs[run_id], tuple(users[run_id])) for run_id in configs]


def plan_table(planned: list[PlannedRun], root: Path, costs: CostBook) -> pd.DataFrame:
    """One row per run: id, chapters, state, steps done and to train, s/step (measured or
    estimated on this device) and the estimated seconds left."""
    rows = []
    for p in planned:
        state, done = locate(p.cfg, root).state()
        cost = costs.cost(p.cfg)
        left = p.cfg.train.steps - done
        rows.append({"run": p.cfg.run_id, "chapters": ", ".join(p.chapters), "state": state, "steps": p.cfg.train.steps,
                     "done": done, "s/step": cost.seconds, "s/step is": "measured" if cost.measured else "estimated",
                     "seconds left": left * cost.seconds})
    columns = ["run", "chapters", "state", "steps", "done", "s/step", "s/step is", "seconds left"]
    return pd.DataFrame(rows, columns=columns).set_index("run")  # a chapter that trains nothing: no rows


def _short(chapters: str, shown: int = 2) -> str:
    names = chapters.split(", ")
    return chapters if len(names) <= shown + 1 else f"{', '.join(names[:shown])} and {len(names) - shown} more"


def plan_text(table: pd.DataFrame, preset: str, process: str) -> str:
    """A ``plan_table`` as ``python -m matcomp plan`` prints it: the table, the runs by state, and the steps
    and time of the whole plan and of what is left to train on ``process`` (e.g. "one cpu process with 2
    threads")."""
    shown = table.assign(**{"chapters": table.chapters.map(_short), "s/step": table["s/step"].map("{:.3g}".format),
                            "seconds left": table["seconds left"].map("{:,.0f}".format)})
    todo = table[table.state.isin(["missing", "partial"])]
    whole = (table.steps * table["s/step"]).sum()
    return "\n".join([
        shown.to_string(),
        f"\n{len(table)} runs at preset {preset}: "
        + ", ".join(f"{n} {state}" for state, n in table.state.value_counts().items()),
        f"the whole plan from scratch: {int(table.steps.sum()):,} steps, about {duration(whole)}",
        f"to train: {len(todo)} runs, {int((todo.steps - todo.done).sum()):,} steps, about "
        f"{duration(todo['seconds left'].sum())} on {process} ({(table['s/step is'] == 'measured').sum()} of "
        f"{len(table)} step costs measured, the others estimated from FLOPs; --measure measures them)"])
