"""A finding read up the size ladder and judged seed by seed: the chapter's scale, then the larger tasks of
its scale (at ``cpu``: 4×4, 5×5, 7×7), then the paper-scale run where one is shipped, beside the paper's
numbers. The largest task read on several seeds is judged on every seed trained for it, by the book's one
rule (``matcomp.book.judging.verdicts``); the smaller tasks show whether a difference shrinks as the task grows,
and a single paper-scale run is judged on its own, as one seed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pandas as pd
from IPython.display import Markdown, display

from matcomp.analysis.phases import Phases
from matcomp.book.judging.verdicts import (
    AGAINST,
    DIRECTION,
    DRAW,
    GROWS,
    MARKS,
    MATCHES,
    NOISE,
    SHORT,
    UNREAD,
    Claim,
    Verdict,
    by_reason,
    seed_list,
    verdict,
)
from matcomp.book.markup import glue_quoted
from matcomp.book.spec import KeyNumber
from matcomp.book.tables import findings, number_text, styled
from matcomp.paper import POST_SHIFT, SUDDEN_DROP, reported
from matcomp.presets import preset_config
from matcomp.runs.run import Run
from matcomp.runs.shipped import REPO

FINISHED = "how finished each run is (judged with the sudden drop)"  # ``DEPTH`` on a one-model page: judged once
OWN_RECIPE = "the step of this scale's own recipe, not comparable with the paper's"  # a drawn number's, on the ladder


def paper_depth() -> float:
    """The paper's depth, derived by the book: the paper prints no such ratio, so its plateau L_mask is set over
    its final total L read as L_mask (L / p_mask: its L_obs is near 0 by then), 16.8×; its post-shift L_mask
    (0.0128, §3.2.1) would give 17.5× (``depth_derivation`` says so wherever the number is shown)."""
    return SUDDEN_DROP["L_mask on the plateau"] * preset_config("paper").data.p_mask / SUDDEN_DROP["final L"]


def depth_derivation() -> str:
    """How ``paper_depth`` is derived from the paper's numbers (its plateau and final L, WS §3.1.2 and App. B),
    as a sentence gives it beside the value, with what the paper's post-shift L_mask (§3.2.1) would give.

    >>> depth_derivation()
    'plateau L_mask 0.2236 × p_mask 0.3 / final total L 0.004; its post-shift L_mask, 0.0128, gives 17.5'
    """
    plateau, post = SUDDEN_DROP["L_mask on the plateau"], reported(POST_SHIFT, "no intervention", 1)
    return (f"plateau L_mask {plateau:g} × p_mask {preset_config('paper').data.p_mask:g} / final total L "
            f"{SUDDEN_DROP['final L']:g}; its post-shift L_mask, {post:g}, gives {plateau / post:.3g}")


# how far below its plateau a run ends (``Drop.factor``): how finished it is, judged on the sudden drop's page and
# shown apart on every other ladder (below half its plateau: dropped)
DEPTH = KeyNumber("depth", "× below the plateau",
                  Claim(paper_depth(), 2.0, training=GROWS, derived=depth_derivation()),
                  tests=("bert_solves_lrmc", "plateau_then_sudden_drop"))


def unread_reason(run: Run, phases: Phases | None) -> str | None:
    """Why a post-shift finding cannot be read on ``run`` (None where it can): it has no drop, so no
    post-shift model, or it was kept with its metrics alone (``phases`` None)."""
    if run.drop.half_step is None:
        stopped = run.last_step < run.config.train.steps
        return f"no drop by step {run.last_step:,}, where it was stopped" if stopped else \
            f"no drop in {run.last_step:,} steps"
    return "kept with its metrics alone" if phases is None else None


def stopped_short(run: Run) -> str | None:
    """Where a clock stopped ``run`` before its budget, and how far below its plateau it was then: "stopped at step
    29,000 of 50,000 (6.53× below its plateau)"; None where it trained its budget, or where the book's rule ended it
    after its drop (``train.stop_after_drop``, which stops a run deliberately). Its numbers that training still
    moves are judged as far as it was trained (``Claim.mark``).

    >>> from types import SimpleNamespace as N
    >>> train = N(steps=60_000, stop_after_drop=12_000)
    >>> stopped_short(N(config=N(train=train), last_step=18_000, drop=N(half_step=None, factor=1.342)))
    'stopped at step 18,000 of 60,000 (1.34× below its plateau)'
    >>> stopped_short(N(config=N(train=train), last_step=25_000, drop=N(half_step=12_542, factor=23.9)))
    """
    train = run.config.train
    if run.last_step >= train.steps or (train.stop_after_drop and run.drop.half_step is not None):
        return None
    return f"stopped at step {run.last_step:,} of {train.steps:,} ({run.drop.factor:.2f}× below its plateau)"


def _spread(values: pd.Series) -> str:
    """The mean and range of the seeds read, as the seed table writes them; no mean where a seed has no value
    (a seed without a drop has no drop step), since a mean of the others would hide it.

    >>> _spread(pd.Series([12542.0, float("nan"), 15305.0])), _spread(pd.Series([1.0, 3.0]))
    ('— (1 without one; the others 12,542 to 15,305)', '2 (1 to 3)')
    """
    present = values.dropna()
    if present.empty:
        return "—"
    span = f"{number_text(present.min())} to {number_text(present.max())}"
    if len(present) < len(values):
        return f"— ({len(values) - len(present)} without one; the others {span})"
    return f"{number_text(values.mean())} ({span})"


def read_on_none(seeds, unread: Mapping[str, Mapping[int, str]], keys: list[str]) -> list[int]:
    """The seeds of ``seeds`` that cannot be read on any of ``keys`` (``unread``: key number -> seed -> why): not
    read at all, so out of every mean and grouped by why in the seed table."""
    return [seed for seed in seeds if all(seed in unread.get(key, {}) for key in keys)]


@dataclass(frozen=True)
class Ladder:
    """One finding's key numbers up the ladder (``numbers``: id -> its ``KeyNumber``, in their order; every table
    below is keyed by id, and a label is made only where a table or sentence is shown). ``tasks``: one row per
    task, smallest first (a task read on
    several seeds: the mean over those that can be read); ``seeds``: the judged task's (``task``) numbers seed
    by seed, every seed trained for it, read at ``steps`` (NaN where ``unread`` says why: key number -> seed
    -> why it cannot be read there), with their standard errors where they are estimates (``errors``);
    ``dropped``: the seeds of the judged task that left their plateau; ``beyond``: single larger runs (label ->
    numbers), judged each as one seed; ``apart``: key numbers shown and not judged here (key -> what they are:
    a check of the method, which holds by construction, or how finished each run is, judged once, on the
    sudden drop's page); ``recipe``: key numbers that depend on the training recipe (a drop step), shown apart
    on the ladder's tasks, which train by another, and judged on the runs above it, which train by the
    paper's; ``stopped`` and ``beyond_stopped``: the judged task's seeds and the runs above that a clock stopped
    before their budget, with where (``stopped_short``), judged as far as they were trained."""

    what: str
    numbers: dict[str, KeyNumber]
    tasks: pd.DataFrame
    task: str
    seeds: pd.DataFrame
    steps: dict[int, int]
    unread: dict[str, dict[int, str]] = field(default_factory=dict)
    errors: pd.DataFrame = field(default_factory=pd.DataFrame)
    dropped: tuple[int, ...] = ()
    beyond: pd.DataFrame = field(default_factory=pd.DataFrame)
    beyond_unread: dict[str, dict[str, str]] = field(default_factory=dict)  # label -> key number -> why
    beyond_errors: pd.DataFrame = field(default_factory=pd.DataFrame)
    apart: dict[str, str] = field(default_factory=dict)
    recipe: dict[str, str] = field(default_factory=dict)  # shown apart on the ladder, judged on the runs above it
    machines: dict[str, str] = field(default_factory=dict)  # each run of the ladder ("4×4 (cpu) seed 0") -> its machine
    columns: dict[str, str] = field(default_factory=dict)  # each single run above -> its column in the verdict table
    stopped: dict[int, str] = field(default_factory=dict)  # seed -> where a clock stopped it (``stopped_short``)
    beyond_stopped: dict[str, str] = field(default_factory=dict)  # single run above -> where a clock stopped it

    @property
    def claims(self) -> dict[str, Claim]:
        """The paper's claim on each key number, by id."""
        return {key: number.claim for key, number in self.numbers.items()}

    def label(self, key: str) -> str:
        """How the tables and sentences show the key number ``key``."""
        return self.numbers[key].label

    def _labelled(self, table: pd.DataFrame) -> pd.DataFrame:
        """A table whose rows are key numbers by id, with their labels."""
        return table.rename(index=self.label)

    def unread_on(self, key: str) -> dict[int, str]:
        """The seeds on which ``key`` cannot be read, with why."""
        return self.unread.get(key, {})

    def read_on(self, key: str) -> list[int]:
        """The seeds on which ``key`` is read."""
        return [seed for seed in self.seeds.index if seed not in self.unread_on(key)]

    def verdicts(self) -> dict[str, Verdict]:
        """Each key number's verdict over every seed of the judged task (those ``apart`` too, for their marks)."""
        return {key: verdict(self.seeds[key].to_dict(), claim, self.unread_on(key), self.errors[key].to_dict(),
                             self.stopped) for key, claim in self.claims.items()}

    def beyond_verdicts(self) -> dict[str, dict[str, Verdict]]:
        """Each single run above the ladder (label -> key number -> verdict), judged as one seed."""
        return {label: {key: verdict({label: row[key]}, claim,
                                     {label: why} if (why := self.beyond_unread.get(label, {}).get(key)) else None,
                                     {label: self.beyond_errors.loc[label, key]},
                                     {label: at} if (at := self.beyond_stopped.get(label)) else None)
                        for key, claim in self.claims.items()} for label, row in self.beyond.iterrows()}

    def paper_scale_numbers(self, chapter: str) -> dict[str, str]:
        """The paper-scale run's key numbers as the chapter's prose quotes them (``{eval}`<chapter>_paper_scale_<key
        number's id>```, glued by ``show_ladder``): the single run above the ladder (at the default scale the paper's
        own model), each number as the tables print it, or why it cannot be read; "—" for each where no single run
        (or more than one) stands above the ladder, so that the prose is never left without its value."""
        one = len(self.beyond) == 1
        return {f"{chapter}_paper_scale_{key}": (self.beyond_unread.get(self.beyond.index[0], {}).get(key)
                                                       or number_text(self.beyond.iloc[0][key])) if one else "—"
                for key in self.claims}

    def column(self, where: str) -> str:
        """The verdict table's column of a place ``judged`` reads: a single run above the ladder by its task and
        preset ("7×7 rank 2 (paper), one seed", one column whichever chapter reads it), the judged task as it is."""
        return self.columns.get(where, where)

    def judged(self) -> dict[str, dict[str, Verdict]]:
        """Every verdict of the finding (those ``apart`` left out), by where it is read: the judged task over
        its seeds, then each run above it."""
        task = {key: v for key, v in self.verdicts().items() if key not in self.recipe}
        places = {f"{self.task}, {len(self.seeds)} seed{'s' * (len(self.seeds) > 1)}": task, **self.beyond_verdicts()}
        return {where: {key: v for key, v in verdicts.items() if key not in self.apart}
                for where, verdicts in places.items()}

    def _cell(self, seed, key: str, mark: str) -> str:
        """One seed's number as the seed table writes it: the number, its standard error where it is an
        estimate, and its mark."""
        se = self.errors.loc[seed, key]
        shown = number_text(self.seeds.loc[seed, key]) + ("" if pd.isna(se) else f" ± {number_text(se)}")
        return f"{shown} {MARKS[mark]}"

    def seed_table(self) -> pd.DataFrame:
        """The judged task seed by seed as text, one key number a row: each seed read on some key number with
        its numbers and marks (``MARKS``; a number it cannot read marked so), the seeds read on none grouped by
        why (one column a reason), the mean and range of those read, the paper's number and the verdict."""
        verdicts, columns = self.verdicts(), {}
        nowhere: dict[int, str] = {}  # seeds read on no judged key number, with the one reason
        judged = [key for key in self.claims if key not in self.apart]
        for seed in read_on_none(self.seeds.index, self.unread, judged):
            whys = {self.unread_on(key)[seed] for key in judged}
            if len(whys) == 1:
                nowhere[seed] = whys.pop()
        for seed in self.seeds.index.drop(list(nowhere)):
            read = [key for key in self.claims if seed not in self.unread_on(key) and key not in self.apart]
            partly = any(seed in self.unread_on(key) for key in self.claims) and \
                all(self.numbers[key].pre_shift for key in read)  # its
            # pre-shift model alone: a seed without a drop, in a finding read on checkpoints
            columns[f"seed {seed}, {'pre-shift ' * partly}step {self.steps[seed]:,}"] = {
                key: self._cell(seed, key, verdicts[key].marks[seed]) if seed not in self.unread_on(key)
                else MARKS[UNREAD] for key in self.claims}
        for why, seeds in by_reason(nowhere).items():
            columns[f"{seed_list(seeds)}: {why}"] = dict.fromkeys(self.claims, MARKS[UNREAD])
        columns["mean of those read (range)"] = {  # over the seeds with a column of their own
            key: _spread(self.seeds.loc[[s for s in self.read_on(key) if s not in nowhere], key])
            for key in self.claims}
        columns["the paper"] = {key: claim.text() for key, claim in self.claims.items()}
        columns["verdict"] = {key: self.apart.get(key) or self.recipe.get(key) or verdicts[key].named
                              for key in self.claims}
        return self._labelled(pd.DataFrame(columns))

    def task_table(self) -> pd.DataFrame:
        """Every task of the ladder as text, one key number a row, then the paper's; a single run above the
        ladder with its marks."""
        beyond = self.beyond_verdicts()
        columns = {label: {key: number_text(row[key]) for key in self.claims} for label, row in self.tasks.iterrows()}
        for label, row in self.beyond.iterrows():
            columns[label] = {key: MARKS[UNREAD] if key in self.beyond_unread.get(label, {}) else
                              f"{number_text(row[key])} {MARKS[beyond[label][key].marks[label]]}"
                              for key in self.claims}
        columns["the paper"] = {key: claim.text() for key, claim in self.claims.items()}
        return self._labelled(pd.DataFrame(columns))

    def read_text(self, key: str, named: bool = True) -> str:
        """Which seeds ``key`` is read on, and how many of them are the seeds that dropped: "the 3 that dropped
        (seeds 0, 3, 6)" (without ``named``: "the 3 that dropped"), "7: the 3 that dropped and 4 on their
        plateau"."""
        read = self.read_on(key)
        dropped = [seed for seed in read if seed in self.dropped]
        if not read:
            return "none"
        if len(dropped) == len(read):
            if not named:
                return f"the {len(read)} that dropped" if len(read) > 1 else "the 1 that dropped"
            return f"the {len(read)} that dropped ({seed_list(read)})" if len(read) > 1 else \
                f"{seed_list(read)}, which dropped"
        return f"{len(read)}: {len(dropped)} that dropped and {len(read) - len(dropped)} on their plateau"

    def sentences(self) -> list[str]:
        """One sentence per key number: its verdict over the judged task's seeds and the numbers of those read,
        then each run above the ladder; a number ``apart`` said as what it is."""
        verdicts, beyond, sentences = self.verdicts(), self.beyond_verdicts(), []
        for key, claim in self.claims.items():
            read = self.read_on(key)
            values = (f"{seed_list(read)}: " + ", ".join(number_text(self.seeds.loc[seed, key]) for seed in read)
                      if read else "no seed read")
            if key in self.apart:
                sentences.append(f"{self.label(key)}: {self.apart[key]}, not judged here ({values}).")
                continue
            judged = self.recipe.get(key) or verdicts[key]
            text = f"{self.label(key)}, {self.task}: {judged} ({values}; the paper: {claim.text(how=True)})."
            for label, by_key in beyond.items():
                shown = self.beyond_unread.get(label, {}).get(key) or number_text(self.beyond.loc[label, key])
                named = by_key[key].named
                text += f" {label}, one seed: {named}" + (f" ({shown})." if shown not in named else ".")  # once
            sentences.append(text)
        if self.machines:
            sentences.append("Trained on: " + "; ".join(f"{run}: {at}" for run, at in self.machines.items()) + ".")
        return sentences

    def headline(self) -> Markdown:
        """The chapter's verdicts at a glance, for the top of its page: each key number judged, where, with its
        count of seeds, which seeds it is read on and why the others cannot be."""
        lines = []
        for where, verdicts in self.judged().items():
            lines.append(f"- {where}:")
            for key, v in verdicts.items():
                if v.untold and len(v.marks) == 1:  # one run that cannot tell: its reason says it all
                    lines.append(f"  - {self.label(key)}: **{v.named}**")
                    continue
                count = f"as the paper on {v.count(MATCHES)} of {len(v.marks)}" if v.spread is None else str(v.spread)
                if where.startswith(self.task) and self.dropped != tuple(self.seeds.index):
                    count += f", read on {self.read_text(key)}"
                for reasons, what in ((v.untold, "cannot tell yet"), (v.unread, "cannot be read")):
                    if reasons and where.startswith(self.task):
                        count += f"; {what} on " + "; ".join(f"{seed_list(seeds)}: {why}"
                                                             for why, seeds in by_reason(reasons).items())
                    elif reasons:
                        count += f"; {len(reasons)} {what}"
                lines.append(f"  - {self.label(key)}: **{v.category}** ({count})")
        return Markdown("\n".join(lines))


def show_ladder(ladder: Ladder, chapter: str) -> None:
    """A chapter's ladder section: the judged task seed by seed with each seed's mark, the mean and range of
    those read, the paper's number and the verdict; then every task of the ladder; then one sentence per key
    number. One key number a row where they are many, so a finding reads across the seeds to its verdict, and
    one seed a row where the seeds outnumber them, so the table fits the page. The verdicts at a glance
    (``Ladder.headline``) are quoted as ``<chapter>_verdicts`` for the top of the page, how to read the ladder
    as ``ladder_reading``, and the paper-scale run's numbers for the prose (``Ladder.paper_scale_numbers``)."""
    legend = (f"{MARKS[MATCHES]} as the paper, {MARKS[DIRECTION]} its direction only, {MARKS[AGAINST]} neither, "
              f"{MARKS[NOISE]} cannot tell (within two standard errors of no effect), {MARKS[SHORT]} cannot tell yet "
              f"(a clock stopped its run short of the paper's), {MARKS[DRAW]} one draw (a drop step, judged only "
              f"with other seeds'), {MARKS[UNREAD]} cannot be read")
    seeds = ladder.seed_table()
    if seeds.shape[1] > seeds.shape[0] + 3:  # many seeds and few key numbers: one seed a row, so it fits the page
        seeds = seeds.T
    caption = f"{ladder.task}, every seed trained: {legend}"
    display(styled(seeds, "{}", caption))
    display(styled(ladder.task_table(), "{}", f"{ladder.what}: each task of the ladder, and the paper's"))
    display(findings(*ladder.sentences()))
    glue_quoted({f"{chapter}_verdicts": ladder.headline(), "ladder_reading": reading_guide(),
                 **ladder.paper_scale_numbers(chapter)})


def reading_guide() -> Markdown:
    """How to read a one-model chapter's ladder, written once in ``book/ladder_reading.md`` (its ``%`` comment
    lines left out) and quoted by each such chapter as ``{eval}`ladder_reading```: JupyterLab renders no
    ``{include}``, so an included file would be missing there."""
    lines = (REPO / "book" / "ladder_reading.md").read_text().splitlines()
    return Markdown("\n".join(line for line in lines if not line.startswith("%")).strip())
