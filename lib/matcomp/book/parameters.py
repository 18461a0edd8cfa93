"""What a chapter parameter may hold: its rule sits on its field of the chapter's ``Parameters``
(``parameter(default, rule)``), checked where the parameter enters: the chapter's first cell (``ChapterSpec.check``)
and a sweep's points before any runs (``sweep.check_points``), both through the chapter's declaration. A bad value
stops with one line naming the chapter, the parameter and what it may be, instead of a traceback from deep inside
the analysis it would have reached.

``seed`` and ``overrides`` carry no rule: they are checked where the config is made (``chapter.chapter_config``);
``intervention`` by the shortening chapter. ``preset`` and ``one_model`` carry one, so that an empty one (an unset shell
variable: ``-p preset "$P"``) stops rather than running the default scale.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from matcomp.drop import PLATEAU_FROM
from matcomp.presets import PRESETS
from matcomp.seeding import MAX_ANALYSIS_SEED, MAX_TSNE_SEED

RULE = "rule"  # the key of a parameter's rule in its field's metadata


def _integer(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class Rule:
    """A parameter's test and the words that say what passes it."""

    ok: Callable[[Any], bool]
    allowed: str

    def problem(self, value, none: bool) -> str | None:
        """What ``value`` should be, or None if it passes; ``none``: None passes (the chapter reads it as the
        scale's value: its default is None)."""
        if value is None and none:
            return None
        return None if self.ok(value) else self.allowed + (", or None for the scale's" if none else "")


def _list_of(test: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, (list, tuple)) and len(v) > 0 and all(test(x) for x in v)


BERT_PRESETS = sorted(name for name, cfg in PRESETS.items() if cfg.model.arch == "bert")
COUNT = Rule(lambda v: _integer(v) and v >= 1, "an integer >= 1")
SEED = Rule(lambda v: _integer(v) and 0 <= v <= MAX_ANALYSIS_SEED, f"an integer in [0, {MAX_ANALYSIS_SEED:,}] (a seed)")
TSNE_SEED = Rule(lambda v: _integer(v) and 0 <= v <= MAX_TSNE_SEED, f"an integer in [0, {MAX_TSNE_SEED:,}] (a seed)")
STEP = Rule(lambda v: _integer(v) and v >= 0, "an integer >= 0 (a step)")
FRACTION = Rule(lambda v: _number(v) and 0 < v <= 1, "a number in (0, 1]")
MULTIPLE = Rule(lambda v: _number(v) and v > 0, "a number > 0")
COUNTS = Rule(_list_of(lambda v: _integer(v) and v >= 1), "a non-empty list of integers >= 1, e.g. [2, 4]")
RATES = Rule(_list_of(lambda v: _number(v) and 0 < v < 1), "a non-empty list of numbers in (0, 1)")
MULTIPLES = Rule(_list_of(lambda v: _number(v) and v > 0), "a non-empty list of numbers > 0")
STEPS = Rule(lambda v: _integer(v) and v > PLATEAU_FROM, f"an integer > {PLATEAU_FROM} (training steps: a run's "
             f"plateau is read after step {PLATEAU_FROM})")
PRESET = Rule(lambda v: v in PRESETS, f"one of {sorted(PRESETS)}")
MODEL = Rule(lambda v: v in BERT_PRESETS, f"a trained BERT's preset, one of {BERT_PRESETS}")
FOLDER = Rule(lambda v: isinstance(v, str) and bool(v.strip()), "a folder path")


def parameter(default: Any, rule: Rule) -> Any:
    """A chapter parameter's dataclass field: its ``default`` (a list is copied for each instance, as a field's
    default may not be a list itself) and the ``rule`` a value given it must pass (None passes where the default
    is None: the chapter reads it as the scale's value)."""
    metadata = {RULE: rule}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def check_values(chapter: str, parameters: type, values: dict) -> None:
    """ValueError naming the first parameter of ``values`` (name -> value) that the rule on its field of
    ``parameters`` (a chapter's ``Parameters`` dataclass) refuses."""
    declared = {f.name: f for f in fields(parameters)}
    for name, value in values.items():
        rule = declared[name].metadata.get(RULE) if name in declared else None
        problem = rule.problem(value, none=declared[name].default is None) if rule is not None else None
        if problem is not None:
            raise ValueError(f"the {chapter} chapter's parameter {name} must be {problem}; got {value!r}")
