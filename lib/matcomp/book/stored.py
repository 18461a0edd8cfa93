"""The derived tables shipped in ``runs/reference/derived/`` (``matcomp.runs.derived``): the slow,
deterministic analyses of the book's default build, so that it reads them instead of recomputing
them. They are those of the ``nuclear_norm`` chapter (its sweep over p_mask and its λ tables: the paper's
7x7 data, its draws, and the chapter's model), the ``ood`` chapter (its rank, rows and columns panels)
and the one-model chapters' size ladders (their key numbers on each run of the ladder), at the ``cpu``
preset with each chapter's default parameters, read from its own parameters cell, so the shipped tables
are exactly the ones its default build asks for.

``python -m matcomp derive`` computes whichever is missing or stale and replaces the old files;
``tests/test_derived.py`` fails, naming that command, when a shipped table no longer matches what the
code would compute (its key: checkpoints, parameters, source, library versions).
"""

from __future__ import annotations

from matcomp.analysis.baselines import draws_derivation, lambda_derivation, sweep_derivation
from matcomp.analysis.key_numbers import FINDINGS, finding_spec, key_numbers_derivation
from matcomp.analysis.ood import default_axes, panel_derivations, rank_panel, rank_panel_config
from matcomp.analysis.phases import Phases, phases
from matcomp.book.chapter import DEFAULT_PRESET, ladder_runs, model_preset, paper_scale_runs, sizes
from matcomp.book.ladder import unread_reason
from matcomp.book.sweep import notebook_parameters
from matcomp.config import RunConfig
from matcomp.presets import preset as named_preset
from matcomp.runs.derived import Derivation
from matcomp.runs.run import Run
from matcomp.runs.shipped import REPO, find_reference

BOOK = REPO / "book"


def chapter_defaults(chapter: str) -> dict:
    """The default values of a chapter's ``parameters`` cell (its assignments of literals).

    >>> chapter_defaults("nuclear_norm")["lam"]
    0.001
    """
    return notebook_parameters(BOOK / f"{chapter}.ipynb")


def _shipped(cfg: RunConfig) -> Run:
    run = find_reference(cfg)
    if run is None:
        raise ValueError(f"run {cfg.run_id} is not shipped; a shipped derived table must read shipped runs")
    return run


def nuclear_norm_derivations(preset: str = DEFAULT_PRESET) -> list[Derivation]:
    """The ``nuclear_norm`` chapter's sweep and λ tables at ``preset`` with its default parameters."""
    p = chapter_defaults("nuclear_norm")
    name = model_preset(preset, p["model"])
    run = _shipped(named_preset(name))
    post = phases(run, paper_steps=sizes(name).paper_steps).post
    samples = p["samples"] or sizes(preset).completion_samples
    lambda_samples = p["lambda_samples"] or sizes(preset).lambda_samples
    paper_data, seed, workers = named_preset("paper").data, p["eval_seed"], p["workers"]
    return [sweep_derivation(run, post, p["p_masks"], samples, p["lam"], seed, workers),
            lambda_derivation(paper_data, p["lams"], lambda_samples, seed, workers=workers),
            draws_derivation(paper_data, p["lam"], lambda_samples, range(seed, seed + p["noise_seeds"]), workers),
            lambda_derivation(run.config.data, p["lams"], lambda_samples, seed, run=run, step=post,
                              label=f"BERT (step {post})", workers=workers)]


def ood_derivations(preset: str = DEFAULT_PRESET) -> list[Derivation]:
    """The ``ood`` chapter's rank, rows and columns panels at ``preset`` with its default parameters."""
    p = chapter_defaults("ood")
    cfg, size = named_preset(preset), sizes(preset)
    run = _shipped(cfg)
    post = phases(run, paper_steps=size.paper_steps).post
    after_drop = size.after_drop if p["after_drop"] is None else p["after_drop"]
    rank_cfg = rank_panel_config(cfg, cfg.train.steps, after_drop)
    rank_run, rank_step, _ = rank_panel(run, post, None if rank_cfg is None else _shipped(rank_cfg))
    axes = default_axes(cfg.data, p["reach"])
    return list(panel_derivations(run, post, rank_run, rank_step, cfg.data, axes, p["samples"],
                                  cfg.train.seed).values())


def finding_derivations(run: Run, phases: Phases, preset: str) -> list[Derivation]:
    """The key numbers of every one-model chapter (``FINDINGS``) on ``run`` at its ``phases``, with
    each chapter's default parameters at ``preset``."""
    return [key_numbers_derivation(finding, run, phases, finding_parameters(finding, preset)) for finding in FINDINGS]


def finding_parameters(finding: str, preset: str) -> dict:
    """The parameters a one-model chapter reads its key numbers with by default at ``preset``."""
    p = chapter_defaults(finding)
    if finding == "nuclear_norm":  # the chapter's own default: the paper's 512, fewer at smoke
        p["samples"] = p["samples"] or sizes(preset).completion_samples
    return p


def ladder_derivations(preset: str = DEFAULT_PRESET) -> list[Derivation]:
    """The key numbers of every one-model chapter on each run of its size ladder at ``preset`` that reads them
    (``matcomp.book.ladder.finding_ladders``: every finding on a seed that dropped, those with pre-shift numbers
    on a seed kept with its pre-shift checkpoint that did not) and on its paper-scale run where one is shipped
    with checkpoints (``chapter.paper_scale_runs``; recomputed here from its bf16 weights), with the chapter's
    default parameters, finding by finding."""
    runs = [(run, phases) for seeds in ladder_runs(preset).values() for run, phases in seeds.values()
            if phases is not None] + list(paper_scale_runs(preset).values())
    return [key_numbers_derivation(finding, run, phases, finding_parameters(finding, preset))
            for finding in FINDINGS for run, phases in runs
            if unread_reason(run, phases) is None or finding_spec(finding).pre_shift]


def paper_scale_derivations(run: Run, preset: str) -> list[Derivation]:
    """What the paper-scale run's pipeline (``matcomp.remote``) computes beside its training, on the
    checkpoints it brings home: every one-model chapter's key numbers at the paper's phases (pre-shift at
    step 4,000 for the paper's presets) with the chapters' default parameters at ``preset``."""
    return finding_derivations(run, phases(run, paper_steps=sizes(preset).paper_steps), preset)


def shipped_derivations() -> list[Derivation]:
    """Every derivation whose tables are shipped."""
    return [*nuclear_norm_derivations(), *ood_derivations(), *ladder_derivations()]
