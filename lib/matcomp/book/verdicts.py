"""The book's one verdict rule. Each seed's number is judged against the paper's on its own (``Claim.mark``),
and a finding's verdict says on how many of the seeds trained for its task it holds (``verdict``): a seed
that never left its plateau is counted as one on which a post-shift finding cannot be read, never left out,
a seed whose number is an estimate within two standard errors of the value without the effect cannot tell
either way, and a mean is printed beside the seeds but never judged. The categories are defined once (``CATEGORIES``),
shown on the book's first page, and every chapter's verdicts come from here, so the same numbers get the
same verdict everywhere."""

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
SAMPLE_COUNTS = ("samples", "ablation_samples", "train_matrices", "test_matrices")  # the readers' parameters of it

MATCHES, DIRECTION, AGAINST, NOISE, UNREAD = "matches", "direction only", "against", "cannot tell", "cannot be read"
MARKS = {MATCHES: "✓", DIRECTION: "~", AGAINST: "✗", NOISE: "≈", UNREAD: "·"}  # a seed's mark in the tables

CATEGORIES = {
    "reproduces": "the number is as the paper's (within the tolerance of its value, or on the side it names) on "
                  "every seed that can be read, and on two seeds at least",
    "consistent with": "it is as the paper's on the one seed that can be read: one seed cannot tell a finding from "
                       "that seed's luck",
    "direction only": "on every seed that can be read the effect is there (the number lies on the paper's side of "
                      "its value without the effect: 1 for a ratio), but it is not as the paper's on all of them",
    "mixed": "it is as the paper's, or in its direction, on some seeds that can be read, and neither on others",
    "does not": "it is neither as the paper's nor in its direction on any seed that can be read (some may not tell)",
    "cannot tell": "on every seed that can be read the number is an estimate within two standard errors of its "
                   "value without the effect (1 for a ratio, the bound the paper names): the noise hides it",
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
    it ours, never the paper's. ``at_most``: the paper's value bounds a one-sided claim from above ("stays small",
    said of its own model's value): any value below it holds, as does one within ``tolerance`` above it."""

    paper: float | Side
    reference: float | None = None
    tolerance: float = TOLERANCE
    ours: bool = False
    at_most: bool = False

    @property
    def no_effect(self) -> float | None:
        """The value the number has without the effect the paper reports: the ``reference``, or a ``Side``'s
        bound."""
        return self.paper.bound if isinstance(self.paper, Side) and self.reference is None else self.reference

    def text(self) -> str:
        """The claim's value as the tables print it, a bound of the book's labelled so: "≥ 0.1 (ours)"."""
        return "≤ " * self.at_most + number_text(self.paper) + " (ours)" * self.ours

    def mark(self, value: float, se: float = float("nan")) -> str:
        """One seed's number judged: ``NOISE`` where it is an estimate (its standard error ``se``) within
        ``NOISE_SE`` standard errors of the value without the effect (``no_effect``); else ``MATCHES``
        (within ``tolerance`` of the paper's in log ratio, or on the side a ``Side`` names), ``DIRECTION``
        (not, but on the paper's side of ``reference``), else ``AGAINST``; a missing number (a seed without a
        drop has no drop step) is against the claim.

        >>> Claim(15000.0).mark(16406.0), Claim(17.0, reference=1).mark(4.3), Claim(3.0, 1).mark(0.5)
        ('matches', 'direction only', 'against')
        >>> Claim(Side(1)).mark(2.0), Claim(Side(1)).mark(0.0), Claim(15000.0).mark(float("nan"))
        ('matches', 'against', 'against')
        >>> Claim(Side(1, above=False, strict=True)).mark(0.915, se=0.14), Claim(2.6, 1).mark(1.9, se=0.2)
        ('cannot tell', 'direction only')
        >>> [Claim(40.2, at_most=True).mark(v) for v in (3.06, 49.0, 300.0)], Claim(40.2, at_most=True).text()
        (['matches', 'matches', 'against'], '≤ 40.2')
        """
        if pd.isna(value):
            return AGAINST
        if self.no_effect is not None and not pd.isna(se) and abs(value - self.no_effect) <= NOISE_SE * se:
            return NOISE
        if isinstance(self.paper, Side):
            return MATCHES if self.paper.holds(value) else AGAINST
        if self.at_most and value <= self.paper:
            return MATCHES
        if _distance(value, self.paper) <= self.tolerance:
            return MATCHES
        if self.reference is not None and (value - self.reference) * (self.paper - self.reference) > 0:
            return DIRECTION
        return AGAINST


@dataclass(frozen=True)
class Verdict:
    """A finding judged seed by seed: every seed trained for its task with its mark (``marks``), and why a
    seed cannot be read (``unread``: seed -> reason)."""

    marks: dict[Hashable, str]
    unread: dict[Hashable, str] = field(default_factory=dict)

    def count(self, mark: str) -> int:
        return sum(m == mark for m in self.marks.values())

    @property
    def category(self) -> str:
        """The finding's category (``CATEGORIES``) from its seeds' marks."""
        read = [m for m in self.marks.values() if m != UNREAD]
        if not read:
            return "cannot be read"
        if all(m == MATCHES for m in read):
            return "reproduces" if len(read) >= 2 else "consistent with"
        if all(m in (MATCHES, DIRECTION) for m in read):
            return "direction only"
        if all(m == NOISE for m in read):
            return "cannot tell"
        return "does not" if all(m in (AGAINST, NOISE) for m in read) else "mixed"

    def __str__(self) -> str:
        """The category and its count over every seed trained, e.g. "mixed: as the paper on 1 of 7 seeds, its
        direction only on 1 more, neither on 1; 4 cannot be read (seeds 1, 2, 5: no drop; 4: ...)"."""
        n, size, direction, against = len(self.marks), self.count(MATCHES), self.count(DIRECTION), self.count(AGAINST)
        noise = self.count(NOISE)
        parts = [f"as the paper on {size} of {n} seed{'s' * (n != 1)}"]
        parts += [f"its direction only on {direction} more"] if direction else []
        parts += [f"within noise on {noise}"] if noise else []
        parts += [f"neither on {against}"] if against and (size or direction or noise) else []
        text = f"{self.category}: {', '.join(parts)}"
        if self.unread:
            text += (f"; {len(self.unread)} cannot be read ("
                     + "; ".join(f"{seed_list(seeds)}: {why}" for why, seeds in by_reason(self.unread).items()) + ")")
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
            errors: Mapping[Any, float] | None = None) -> Verdict:
    """The verdict on one key number over every seed trained for its task: ``values`` (seed -> its number),
    ``unread`` (seed -> why the number cannot be read on it: no drop, no checkpoints kept), which together
    must name every seed trained (a seed in both is unread), and ``errors`` (seed -> the standard error of
    its number, where it is an estimate from sampled matrices).

    >>> str(verdict({0: 20.0, 3: 4.3, 6: 5.0}, Claim(17.0, reference=1), {1: "no drop", 2: "no drop"}))
    'direction only: as the paper on 1 of 5 seeds, its direction only on 2 more; 2 cannot be read (seeds 1, 2: no drop)'
    >>> verdict({0: 2.0, 3: 0.0, 6: 0.0}, Claim(Side(1))).category, verdict({0: 2.0}, Claim(Side(1))).category
    ('mixed', 'consistent with')
    >>> str(verdict({0: 0.915, 3: 0.5}, Claim(Side(1, above=False, strict=True)), errors={0: 0.14, 3: 0.1}))
    'mixed: as the paper on 1 of 2 seeds, within noise on 1'
    """
    unread, errors = dict(unread or {}), dict(errors or {})
    marks = {seed: UNREAD if seed in unread else claim.mark(value, errors.get(seed, float("nan")))
             for seed, value in values.items()}
    marks.update({seed: UNREAD for seed in unread if seed not in marks})
    return Verdict(marks, unread)


def holds(seeds: Mapping[Any, bool]) -> Verdict:
    """The verdict on a claim the paper makes with no number (a group has no plateau), read on each seed as
    holding or not.

    >>> holds({0: True}).category, holds({0: True, 1: False}).category
    ('consistent with', 'mixed')
    """
    return verdict({seed: float(held) for seed, held in seeds.items()}, Claim(Side(1)))
