"""The book's one verdict rule. Each seed's number is judged against the paper's on its own (``Claim.mark``),
and a finding's verdict says on how many of the seeds trained for its task it holds (``verdict``): a seed
that never left its plateau is counted as one on which a post-shift finding cannot be read, never left out,
a seed whose number is an estimate within two standard errors of the value without the effect cannot tell
either way, nor can a run a clock stopped before its number reached the paper's in the direction training moves
it, or, where no one can say which way, before it reached it at all (it is judged as far as it was trained), nor
one run's drop step (one draw of a wide distribution, as the
paper's own is), and a mean is printed beside the seeds but never judged. The categories are defined once
(``CATEGORIES``), shown on the book's first page, and every chapter's verdicts come from here, so the same
numbers get the same verdict everywhere."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from matcomp.analysis.key_numbers import NOISE_SE
from matcomp.book.tables import number_text
from matcomp.paper import Side

TOLERANCE = 0.25  # |log(ours / paper)| within which a number is as the paper's: within about ±28 %
MIN_SAMPLES = 32  # matrices a key number is read on at least for a verdict: fewer is one draw's luck, not a finding
SAMPLE_COUNTS = ("samples", "copy_samples", "ablation_samples", "train_matrices", "test_matrices")  # readers' of it

MATCHES, DIRECTION, AGAINST, NOISE, UNREAD = "matches", "direction only", "against", "cannot tell", "cannot be read"
SHORT, DRAW = "stopped short", "one draw"  # cannot tell for a reason of its run, not of its sample (``Claim``)
MARKS = {MATCHES: "✓", DIRECTION: "~", AGAINST: "✗", NOISE: "≈", SHORT: "…", DRAW: "?",
         UNREAD: "·"}  # a seed's mark in the tables
GROWS, FALLS, MOVES = 1, -1, 2  # which way training still moves a number, or that it does, either way (``Claim``)

CATEGORIES = {
    "reproduces": "the number is as the paper's (within the tolerance of its value, or on the side it names) on "
                  "every seed that can be read and tell, and on two seeds at least; for a drop step, the paper's "
                  "lies within the range of several seeds' steps, widened by the tolerance",
    "consistent with": "it is as the paper's on the one seed that can be read: one seed cannot tell a finding from "
                       "that seed's luck",
    "direction only": "on every seed that can be read the effect is there (the number lies on the paper's side of "
                      "its value without the effect: 1 for a ratio), but it is not as the paper's on all of them",
    "mixed": "it is as the paper's, or in its direction, on some seeds that can be read, and neither on others",
    "does not": "it is neither as the paper's nor in its direction on any seed that can be read (some may not "
                "tell); for a drop step, the paper's lies outside the range of several seeds' steps, widened by the "
                "tolerance",
    "cannot tell": "no seed that can be read tells: its number is an estimate within two standard errors of its "
                   "value without the effect (1 for a ratio, the bound the paper names), so the noise hides it; or "
                   "a clock stopped its run before its budget, short of the paper's number in the direction "
                   "training still moves it (or, where training moves it the way no one can say, anywhere off it); "
                   "or it is one run's drop step, one draw of a wide distribution",
    "cannot be read": "no seed trained for the task can be read: none left its plateau, or none was kept with the "
                      "checkpoints the finding reads",
}
CHECK = "check of the method"  # a number that holds by construction: shown apart, never a finding's verdict


def _distance(value: float, paper: float) -> float:
    """How far ``value`` is from ``paper``: |log ratio| when both are positive, else the relative gap."""
    if value > 0 and paper > 0:
        return abs(math.log(value / paper))
    return abs(value - paper) / abs(paper) if paper else abs(value)


@dataclass(frozen=True)
class Claim:
    """What the paper says of one key number: a value (``paper``), with the value the number has without
    the effect (``reference``: 1 for a ratio, 0 for a difference; None where there is none), or a direction
    only (a ``Side``, whose bound is the value without the effect). ``ours``: the bound is the book's
    choice where the paper states the claim in words alone ("correlate quite strongly"), so the tables label
    it ours, never the paper's. ``at_most``: the paper's value bounds a one-sided claim from above ("remains
    low", said of its own model's value): any value below it holds, as does one within ``tolerance`` above it;
    ``at_least`` bounds one from below the same way ("increases significantly").
    ``training``: which way training still moves the number after the drop (``GROWS``: how far below its plateau
    a run is; ``FALLS``; ``MOVES``: it does, the way no one can say, as a patched loss over a clean loss that both
    still fall), 0 where it does not (a number read on the pre-shift model alone, a head count, a share patching
    restores): a run a clock stopped short of the paper's that way cannot tell yet.
    ``drawn``: the number is one draw of a wide distribution (a drop step: seed 0 of the paper's model dropped at
    15,783 on one engine and 22,973 on another), so one run cannot tell and several are judged by their range
    (``Spread``).
    ``derived``: how the book computes the paper's value from numbers the paper prints, where the paper prints
    none itself (the depth of its drop); the tables label such a value derived, never the paper's."""

    paper: float | Side
    reference: float | None = None
    tolerance: float = TOLERANCE
    ours: bool = False
    at_most: bool = False
    at_least: bool = False
    training: int = 0
    drawn: bool = False
    derived: str = ""

    @property
    def no_effect(self) -> float | None:
        """The value the number has without the effect the paper reports: the ``reference``, or a ``Side``'s
        bound."""
        return self.paper.bound if isinstance(self.paper, Side) and self.reference is None else self.reference

    def text(self, how: bool = False) -> str:
        """The claim's value as the tables print it, a bound of the book's labelled so: "≥ 0.1 (ours)", a value
        the book derives "16.8 (derived)", or with ``how`` the derivation after it, as a sentence gives it.

        >>> depth = Claim(16.8, derived="0.2236 × 0.3 / 0.004")
        >>> depth.text(), depth.text(how=True)
        ('16.8 (derived)', '16.8 (derived: 0.2236 × 0.3 / 0.004)')
        """
        derived = (f" (derived: {self.derived})" if how else " (derived)") if self.derived else ""
        return "≤ " * self.at_most + "≥ " * self.at_least + number_text(self.paper) + " (ours)" * self.ours + derived

    def short(self, value: float) -> bool:
        """Whether ``value`` falls short of the paper's (a ``Side``'s bound) the way training still moves it.

        >>> Claim(16.8, 2.0, training=GROWS).short(6.53), Claim(16.8, 2.0, training=GROWS).short(23.9)
        (True, False)
        >>> Claim(Side(0.5, above=False), training=FALLS).short(0.633), Claim(16.8).short(6.53)
        (True, False)
        >>> Claim(1.09, training=MOVES).short(1.88), Claim(1.09, training=MOVES).short(0.5)  # either side
        (True, True)
        """
        if self.training == MOVES:
            return True
        target = self.paper.bound if isinstance(self.paper, Side) else self.paper
        return self.training * (target - value) > 0

    def mark(self, value: float, se: float = float("nan"), stopped: bool = False) -> str:
        """One seed's number judged: ``NOISE`` where it is an estimate (its standard error ``se``) within
        ``NOISE_SE`` standard errors of the value without the effect (``no_effect``); else ``MATCHES``
        (within ``tolerance`` of the paper's in log ratio, or on the side a ``Side`` names); else ``SHORT``
        where a clock ``stopped`` its run before its budget and the number is short of the paper's the way
        training still moves it (``short``): it is judged as far as it was trained; else ``DIRECTION`` (on the
        paper's side of ``reference``), else ``AGAINST``; a missing number (a seed without a drop has no drop
        step) is against the claim. A drop step (``drawn``) is judged by ``verdict``, never alone.

        >>> Claim(15000.0).mark(16406.0), Claim(17.0, reference=1).mark(4.3), Claim(3.0, 1).mark(0.5)
        ('matches', 'direction only', 'against')
        >>> Claim(Side(1)).mark(2.0), Claim(Side(1)).mark(0.0), Claim(15000.0).mark(float("nan"))
        ('matches', 'against', 'against')
        >>> Claim(Side(1, above=False, strict=True)).mark(0.915, se=0.14), Claim(2.6, 1).mark(1.9, se=0.2)
        ('cannot tell', 'direction only')
        >>> heads = Claim(Side(1), reference=0)  # a head count, 0 without the family; s.e. 0: every resample agrees
        >>> heads.mark(1.0, se=0.5), heads.mark(1.0, se=0.0), heads.mark(0.0, se=0.0)
        ('cannot tell', 'matches', 'against')
        >>> [Claim(2.56, 1, at_least=True).mark(v) for v in (9.0, 2.1, 1.5)], Claim(2.56, at_least=True).text()
        (['matches', 'matches', 'direction only'], '≥ 2.56')
        >>> [Claim(40.2, at_most=True).mark(v) for v in (3.06, 49.0, 300.0)], Claim(40.2, at_most=True).text()
        (['matches', 'matches', 'against'], '≤ 40.2')

        The paper's model, stopped by a clock at step 29,000 of 50,000: 6.53× below its plateau against the
        paper's 16.8×, and 0.273 of the masking rates against the paper's all, cannot tell yet; a number already
        as the paper's counts, and one beyond it the way training moves it is judged as it is:

        >>> depth = Claim(16.8, 2.0, training=GROWS)
        >>> depth.mark(6.53, stopped=True), depth.mark(6.53), Claim(1.0, training=GROWS).mark(0.273, stopped=True)
        ('stopped short', 'direction only', 'stopped short')
        >>> depth.mark(17.5, stopped=True), depth.mark(30.0, stopped=True), Claim(3.03, 1).mark(1.2, stopped=True)
        ('matches', 'direction only', 'direction only')
        """
        if self.drawn:
            raise ValueError("a drawn number (a drop step) is judged with its other draws, by verdict")
        if pd.isna(value):
            return AGAINST
        if self.no_effect is not None and se > 0 and abs(value - self.no_effect) <= NOISE_SE * se:
            return NOISE
        if isinstance(self.paper, Side):
            held = self.paper.holds(value)
        else:
            held = ((self.at_most and value <= self.paper) or (self.at_least and value >= self.paper)
                    or _distance(value, self.paper) <= self.tolerance)
        if held:
            return MATCHES
        if stopped and self.short(value):
            return SHORT
        if not isinstance(self.paper, Side) and self.reference is not None and \
                (value - self.reference) * (self.paper - self.reference) > 0:
            return DIRECTION
        return AGAINST


@dataclass(frozen=True)
class Spread:
    """Several runs' draws of a number as scattered as a drop step (``Claim.drawn``), judged together: the paper's
    value, one draw itself, is as theirs where it lies within their range widened by the tolerance on each side
    (``low`` / e^tolerance to ``high`` × e^tolerance), else against. A run without the number (no drop by its last
    step) drew a later one than it trained to, so it stretches the range up without bound (``high`` infinite)."""

    paper: float
    low: float
    high: float
    draws: int
    tolerance: float = TOLERANCE

    @property
    def mark(self) -> str:
        widened = math.exp(self.tolerance)
        return MATCHES if self.low / widened <= self.paper <= self.high * widened else AGAINST

    def __str__(self) -> str:
        """Where the paper's value lies against the draws' range.

        >>> str(Spread(15000.0, 12000.0, 16000.0, 2))
        "the paper's 15,000 lies within the range of the 2 draws, 12,000 to 16,000, widened by the tolerance"
        >>> str(Spread(15000.0, 20000.0, math.inf, 3))
        "the paper's 15,000 lies outside the range of the 3 draws, 20,000 and later, widened by the tolerance"
        """
        where = "within" if self.mark == MATCHES else "outside"
        span = f"{number_text(self.low)} and later" if math.isinf(self.high) else \
            f"{number_text(self.low)} to {number_text(self.high)}"
        return (f"the paper's {number_text(self.paper)} lies {where} the range of the {self.draws} draws, {span}, "
                f"widened by the tolerance")


@dataclass(frozen=True)
class Verdict:
    """A finding judged seed by seed: every seed trained for its task with its mark (``marks``), why a seed
    cannot be read (``unread``: seed -> reason), why a read seed cannot tell for a reason of its run
    (``untold``: seed -> "stopped at step ... (...× below its plateau)", "one draw"), and, for a drop step read
    on several seeds, their draws judged together (``spread``)."""

    marks: dict[Hashable, str]
    unread: dict[Hashable, str] = field(default_factory=dict)
    untold: dict[Hashable, str] = field(default_factory=dict)
    spread: Spread | None = None

    def count(self, mark: str) -> int:
        return sum(m == mark for m in self.marks.values())

    @property
    def category(self) -> str:
        """The finding's category (``CATEGORIES``) from its seeds' marks: a seed stopped short or read as one
        draw counts neither for the paper nor against it, like one that cannot be read."""
        read = [m for m in self.marks.values() if m != UNREAD]
        if not read:
            return "cannot be read"
        if self.spread is not None:
            return "reproduces" if self.spread.mark == MATCHES else "does not"
        decided = [m for m in read if m not in (SHORT, DRAW)]
        if not decided or all(m == NOISE for m in decided):
            return "cannot tell"
        if all(m == MATCHES for m in decided):
            return "reproduces" if len(decided) >= 2 else "consistent with"
        if all(m in (MATCHES, DIRECTION) for m in decided):
            return "direction only"
        return "does not" if all(m in (AGAINST, NOISE) for m in decided) else "mixed"

    @property
    def named(self) -> str:
        """The category, with why where no seed tells for a reason of its run: "cannot tell: stopped at step
        29,000 of 50,000 (6.53× below its plateau)", "cannot tell: one draw"."""
        category = self.category
        if category != "cannot tell" or not self.untold:
            return category
        reasons = by_reason(self.untold)
        if len(self.marks) == 1:
            return f"{category}: {next(iter(reasons))}"
        return f"{category}: " + "; ".join(f"{seed_list(seeds)}: {why}" for why, seeds in reasons.items())

    def brief(self, read: str = "") -> str:
        """The verdict as the first page's table writes it: its category and count, "mixed (0 of 7; 2 stopped
        short; 4 cannot be read)", with the seeds it is read on where given (``read``: "the 3 that dropped", as
        ``Ladder.read_text`` says it); one seed that cannot tell for a reason of its run, that reason alone.

        >>> depth = Claim(16.8, 2.0, training=GROWS)
        >>> verdict({0: 6.53}, depth, stopped={0: "stopped at step 29,000 of 50,000"}).brief()
        'cannot tell: stopped at step 29,000 of 50,000'
        >>> verdict({0: 23.9, 1: 1.63, 4: 1.34}, depth, {2: "no drop"}, stopped={4: "stopped at step 18,000"}).brief()
        'mixed (0 of 4; 1 stopped short; 1 cannot be read)'
        >>> verdict({0: 22973.0}, Claim(15000.0, drawn=True)).brief()
        'cannot tell: one draw'
        >>> verdict({0: 2.0, 3: 0.5}, Claim(2.0, 1.0), {1: "no drop", 2: "no drop"}).brief("the 2 that dropped")
        'mixed (1 of 4; read on the 2 that dropped; 2 cannot be read)'
        """
        if self.spread is not None:
            where = "within" if self.spread.mark == MATCHES else "outside"
            return f"{self.category} (the paper's {where} the range of {self.spread.draws} draws)"
        if self.untold and len(self.marks) == 1 and self.category == "cannot tell":
            return self.named
        short = f"; {self.count(SHORT)} stopped short" if self.count(SHORT) else ""
        unread = f"; {len(self.unread)} cannot be read" if self.unread else ""
        read = f"; read on {read}" if read else ""
        return f"{self.named} ({self.count(MATCHES)} of {len(self.marks)}{read}{short}{unread})"

    def __str__(self) -> str:
        """The category and its count over every seed trained, e.g. "mixed: as the paper on 1 of 7 seeds, its
        direction only on 1 more, neither on 1; 4 cannot be read (seeds 1, 2, 5: no drop; 4: ...)"; a drop
        step on several seeds, where the paper's lies against their range."""
        if self.spread is not None:
            return f"{self.category}: {self.spread}"
        if self.untold and len(self.marks) == 1 and self.category == "cannot tell":
            return self.named
        n, size, direction, against = len(self.marks), self.count(MATCHES), self.count(DIRECTION), self.count(AGAINST)
        noise = self.count(NOISE)
        parts = [f"as the paper on {size} of {n} seed{'s' * (n != 1)}"]
        parts += [f"its direction only on {direction} more"] if direction else []
        parts += [f"within noise on {noise}"] if noise else []
        parts += [f"neither on {against}"] if against and (size or direction or noise) else []
        text = f"{self.category}: {', '.join(parts)}"
        for count, reasons in ((len(self.untold), self.untold), (len(self.unread), self.unread)):
            if reasons:
                what = "cannot tell yet" if reasons is self.untold else "cannot be read"
                text += (f"; {count} {what} ("
                         + "; ".join(f"{seed_list(seeds)}: {why}" for why, seeds in by_reason(reasons).items()) + ")")
        return text


def seed_list(seeds) -> str:
    """Seeds as a text names them: "seed 3", "seeds 1, 2".

    >>> seed_list([3]), seed_list([1, 2])
    ('seed 3', 'seeds 1, 2')
    """
    seeds = list(seeds)
    return f"seed{'s' * (len(seeds) > 1)} {', '.join(map(str, seeds))}"


def by_reason(unread: Mapping[Any, str]) -> dict[str, list]:
    """The seeds that cannot be read (seed -> why), grouped by why, in their order.

    >>> by_reason({1: "no drop", 2: "no drop", 4: "stopped"})
    {'no drop': [1, 2], 'stopped': [4]}
    """
    reasons: dict[str, list] = {}
    for seed, why in unread.items():
        reasons.setdefault(why, []).append(seed)
    return reasons


def verdict(values: Mapping[Any, float], claim: Claim, unread: Mapping[Any, str] | None = None,
            errors: Mapping[Any, float] | None = None, stopped: Mapping[Any, str] | None = None) -> Verdict:
    """The verdict on one key number over every seed trained for its task: ``values`` (seed -> its number),
    ``unread`` (seed -> why the number cannot be read on it: no drop, no checkpoints kept), which together
    must name every seed trained (a seed in both is unread), ``errors`` (seed -> the standard error of
    its number, where it is an estimate from sampled matrices) and ``stopped`` (seed -> where a clock stopped
    its run before its budget, "stopped at step 29,000 of 50,000 (6.53× below its plateau)": its numbers are
    judged as far as it was trained, ``Claim.mark``).

    >>> str(verdict({0: 20.0, 3: 4.3, 6: 5.0}, Claim(17.0, reference=1), {1: "no drop", 2: "no drop"}))
    'direction only: as the paper on 1 of 5 seeds, its direction only on 2 more; 2 cannot be read (seeds 1, 2: no drop)'
    >>> verdict({0: 2.0, 3: 0.0, 6: 0.0}, Claim(Side(1))).category, verdict({0: 2.0}, Claim(Side(1))).category
    ('mixed', 'consistent with')
    >>> str(verdict({0: 0.915, 3: 0.5}, Claim(Side(1, above=False, strict=True)), errors={0: 0.14, 3: 0.1}))
    'mixed: as the paper on 1 of 2 seeds, within noise on 1'

    The 7×7 depths: seeds 4 and 5, stopped by a clock at step 18,000 on their plateau, cannot tell yet; the
    seeds stopped by the book's rule after their drop, and those that trained their budget, are judged:

    >>> depth, at = Claim(16.8, 2.0, training=GROWS), "stopped at step 18,000 of 60,000"
    >>> for part in str(verdict({0: 23.9, 1: 1.63, 4: 1.34, 5: 1.0}, depth, stopped={4: at, 5: at})).split("; "):
    ...     print(part)
    mixed: as the paper on 0 of 4 seeds, its direction only on 1 more, neither on 1
    2 cannot tell yet (seeds 4, 5: stopped at step 18,000 of 60,000)

    A drop step (``Claim.drawn``) is one draw of a wide distribution, and so is the paper's ~15,000: one run
    cannot tell; several seeds of one task are judged together (``Spread``): as the paper where its value lies
    within their range widened by the tolerance (×/÷ e^0.25 ≈ 1.28), against it where it lies outside. A seed
    without a drop drew a later step than it trained to, so it stretches the range up without bound.

    >>> step = Claim(15000.0, drawn=True)
    >>> str(verdict({0: 22973.0}, step)), verdict({0: 22973.0}, step).marks
    ('cannot tell: one draw', {0: 'one draw'})
    >>> str(verdict({0: 12542.0, 3: 15305.0, 6: 8946.0}, step))
    "reproduces: the paper's 15,000 lies within the range of the 3 draws, 8,946 to 15,305, widened by the tolerance"
    >>> str(verdict({0: 5060.0, 1: 6812.0}, step))
    "does not: the paper's 15,000 lies outside the range of the 2 draws, 5,060 to 6,812, widened by the tolerance"
    >>> verdict({0: 18000.0, 1: float("nan")}, step).category, verdict({0: 30000.0, 1: float("nan")}, step).category
    ('reproduces', 'does not')
    """
    unread, errors, stopped = dict(unread or {}), dict(errors or {}), dict(stopped or {})
    read = {seed: value for seed, value in values.items() if seed not in unread}
    untold: dict[Any, str] = {}
    spread = None
    if claim.drawn:
        marks = dict.fromkeys(read, DRAW)
        if len(read) == 1:
            untold = dict.fromkeys(read, DRAW)
        elif read:
            drops = [value for value in read.values() if not pd.isna(value)]
            spread = Spread(float(claim.paper), min(drops, default=math.inf),  # type: ignore[arg-type]
                            math.inf if len(drops) < len(read) else max(drops), len(read), claim.tolerance)
    else:
        marks = {seed: claim.mark(value, errors.get(seed, float("nan")), seed in stopped)
                 for seed, value in read.items()}
        untold = {seed: stopped[seed] for seed, mark in marks.items() if mark == SHORT}
    marks.update(dict.fromkeys(unread, UNREAD))
    return Verdict({seed: marks[seed] for seed in [*values, *(s for s in unread if s not in values)]}, unread, untold,
                   spread)


def holds(seeds: Mapping[Any, bool]) -> Verdict:
    """The verdict on a claim the paper makes with no number (a group has no plateau), read on each seed as
    holding or not.

    >>> holds({0: True}).category, holds({0: True, 1: False}).category
    ('consistent with', 'mixed')
    """
    return verdict({seed: float(held) for seed, held in seeds.items()}, Claim(Side(1)))
