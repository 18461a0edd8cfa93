"""The paper's own model in the one-model chapters' figures: each draws its main figure for it beside the stand-in's,
by the same code, where the scale ships it with its checkpoints (``chapter.paper_scale_configs``: at the default
``cpu`` scale, trained on a lent GPU). These say which run it is and where it stopped, for the figure's title and
caption, and what a chapter says where the scale does not ship it, instead of showing an empty figure."""

from __future__ import annotations

from matcomp.analysis.phases import Phases
from matcomp.analysis.seeds import trained_on
from matcomp.book.chapter import open_paper_scale, paper_scale_configs, paper_task_runs
from matcomp.presets import DEFAULT_PRESET, preset_config, preset_name
from matcomp.runs.run import Run


def paper_model(scale: str | None = None) -> tuple[Run, Phases] | None:
    """The paper's model at ``scale`` (None: ``$MATCOMP_PRESET``, else ``cpu``) and its phases, where the scale ships
    it with checkpoints, else None."""
    return next(iter(open_paper_scale(scale).values()), None)


def paper_runs(scale: str | None = None) -> list[Run]:
    """Every shipped run of the paper's model at ``scale`` (its seed, trained once a loan; at ``cpu`` the first
    loan's, shipped with its metrics alone, and the one with checkpoints), in ``paper_task_runs``'s order; none
    where the scale ships no paper model with checkpoints."""
    shipped = next(iter(paper_scale_configs(scale).values()), None)
    if shipped is None:
        return []
    return [run for _, run in paper_task_runs(scale) if run.config.name == shipped.name
            and run.config.train.seed == shipped.train.seed]


def stopped_text(run: Run) -> str:
    """Where ``run`` stopped against the paper's budget (the ``paper`` preset's steps, 50,000), whatever its own
    config's: the loan that stopped it may have set fewer.

    >>> from types import SimpleNamespace as N
    >>> print(stopped_text(N(last_step=29_000)), stopped_text(N(last_step=50_000)), sep="; ")
    stopped at step 29,000 of the paper's 50,000; trained for the paper's 50,000 steps
    """
    budget = preset_config("paper").train.steps
    if run.last_step >= budget:
        return f"trained for the paper's {budget:,} steps"
    return f"stopped at step {run.last_step:,} of the paper's {budget:,}"


def described(run: Run) -> str:
    """The paper's model as a figure's title and caption name it: its task and shape, seed, run, where it trained
    and where it stopped."""
    return f"the paper's model ({_shape(run)}), run {run.config.run_id} trained on {_where(run)}"


def described_runs(runs: list[Run]) -> str:
    """``described`` of several runs of the paper's model (one seed trained on several loans), its shape once."""
    if not runs:
        raise ValueError("described_runs needs at least one run of the paper's model")
    return (f"the paper's model ({_shape(runs[0])}), trained {len(runs)} times: "
            + "; ".join(f"run {run.config.run_id} on {_where(run)}" for run in runs))


def _shape(run: Run) -> str:
    d, m = run.config.data, run.config.model
    return (f"{d.n_rows}×{d.n_cols} rank {d.rank}, hidden {m.hidden}, {m.layers} layers, {m.heads} heads; "
            f"seed {run.config.train.seed}")


def _where(run: Run) -> str:
    return f"{trained_on(run.summary)}, {stopped_text(run)}"


def absent_text(scale: str | None = None) -> str:
    """The sentence a chapter prints in place of the paper's model's figure at a scale that does not ship it."""
    return (f"The paper's own model is not shipped with its checkpoints at the {preset_name(scale)} scale (it is at "
            f"the default scale, {DEFAULT_PRESET}, trained on a lent GPU), so this chapter shows no figure of it here.")
