"""The derived tables shipped in ``runs/reference/derived/`` (``matcomp.runs.derived``): the slow,
deterministic analyses of the book's default build, so that it reads them instead of recomputing
them. They are those each chapter declares (``ChapterSpec.derivations``: the ``nuclear_norm`` chapter's sweep and
λ tables, the ``ood`` chapter's panels) and the one-model chapters' size ladders (their key numbers,
``ChapterSpec.key_numbers``, on each run of the ladder), at the ``cpu`` preset with each chapter's default
parameters (``ChapterSpec.defaults``), so the shipped tables are exactly the ones its default build asks for.

``python -m matcomp derive`` computes whichever is missing or stale and replaces the old files;
``tests/test_derived.py`` fails, naming that command, when a shipped table no longer matches what the
code would compute (its key: checkpoints, parameters, code, library versions).
"""

from __future__ import annotations

from matcomp.book.chapter import ladder_configs, open_paper_scale, open_runs
from matcomp.book.chapters import chapter_specs
from matcomp.book.judging.ladder import unread_reason
from matcomp.presets import DEFAULT_PRESET
from matcomp.runs.derived import Derivation


def ladder_derivations(preset: str = DEFAULT_PRESET) -> list[Derivation]:
    """The key numbers of every one-model chapter on each run of its size ladder at ``preset`` that reads them
    (``ladder_readings.finding_ladders``: every finding on a seed that dropped, those with pre-shift numbers
    on a seed kept with its pre-shift checkpoint that did not) and on its paper-scale run where one is shipped
    with checkpoints (``chapter.paper_scale_configs``; recomputed here from its bf16 weights), with the chapter's
    default parameters, finding by finding."""
    ladder = open_runs(ladder_configs(preset), preset, with_phases=True)
    runs = [(run, phases) for seeds in ladder.values() for run, phases in seeds.values() if phases is not None]
    runs += list(open_paper_scale(preset).values())
    return [chapter.key_numbers_derivation(run, phases, chapter.defaults(preset))
            for chapter in chapter_specs() if chapter.key_numbers is not None and not chapter.key_numbers.metrics_only
            for run, phases in runs
            if unread_reason(run, phases) is None or any(number.pre_shift for number in chapter.key_numbers.numbers)]


def shipped_derivations() -> list[Derivation]:
    """Every derivation whose tables are shipped."""
    return [*(d for chapter in chapter_specs() if chapter.derivations is not None
              for d in chapter.derivations(DEFAULT_PRESET)),
            *ladder_derivations()]
