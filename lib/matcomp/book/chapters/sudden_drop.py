"""The sudden-drop chapter (NeurIPS §2, Fig. 1): the model's loss curves, its plateau and drop, and the
drop step over many seeds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import pandas as pd

from matcomp.analysis.seeds import trained_on
from matcomp.book.chapter import chapter_config, model_preset, trained_run
from matcomp.book.chapters import model_runs, seed_runs
from matcomp.book.parameters import COUNT, parameter
from matcomp.book.spec import ChapterSpec, OneModelParameters
from matcomp.config import RunConfig
from matcomp.data import second_moment
from matcomp.drop import FINAL_STEPS, ON_PLATEAU, final_losses
from matcomp.paper import SUDDEN_DROP
from matcomp.presets import preset as named_preset
from matcomp.runs.run import Run
from matcomp.sizes import chapter_sizes


@dataclass(frozen=True)
class Parameters(OneModelParameters):
    """The parameters of the chapter's notebook (its ``parameters`` cell says what each does)."""

    # how many seeds (from `seed` on) of the scale's preset for the drop steps; None: the preset's (cpu: 8)
    seeds: int | None = parameter(None, COUNT)


def runs_read(preset: str) -> list[RunConfig]:
    """The one-model runs (the chapter's model and its ladder), then the scale's drop-step seeds."""
    return model_runs(preset) + seed_runs(preset, "drop_seeds")


class Opening(NamedTuple):
    """What ``setup`` opens: the model's config and run, the config and seeds of the drop-step distribution, and
    the copying plateau r/9."""

    cfg: RunConfig
    run: Run
    seed_cfg: RunConfig
    seeds: int
    plateau_level: float


def setup(p: Parameters) -> Opening:
    """The chapter's model config and run, printed; the config of its drop-step distribution (the scale's
    own preset) and its seeds (None: the preset's); and the copying plateau r/9."""
    cfg = chapter_config(model_preset(p.preset, p.model), p.seed, p.overrides)
    seed_cfg = chapter_config(p.preset, p.seed, p.overrides)  # the drop-step distribution: the scale's own preset
    seeds = p.seeds or chapter_sizes(p.preset).drop_seeds
    run = trained_run(cfg, p.preset)  # a shipped or stored run loads in a second; any other trains
    d, m = cfg.data, cfg.model
    plateau_level = second_moment(d)  # E[X_ij^2] = r/9 for uniform[-1, 1] factors
    stopped = (f" of its budget of {cfg.train.steps:,} (it stops {cfg.train.stop_after_drop:,} after its drop)"
               if run.last_step < cfg.train.steps else "")
    print(f"{cfg.run_id}: {d.n_rows}x{d.n_cols} rank {d.rank}, p_mask {d.p_mask}; hidden {m.hidden}, {m.layers} "
          f"layers, {m.heads} heads; batch {cfg.train.batch}, lr {cfg.train.lr:g}; trained on "
          f"{trained_on(run.summary)} for {run.last_step:,} steps{stopped}")
    return Opening(cfg, run, seed_cfg, seeds, plateau_level)


def paper_table(run: Run, larger: list[tuple[str, Run]]) -> pd.DataFrame:
    """The paper's run (NeurIPS Fig. 2) beside ``run`` and the runs of ``larger`` ((task, run) pairs: at a scale
    that ships them, the paper's own task trained on a lent GPU, ``paper_task_runs``): plateau, drop step, final
    losses and steps (where a run was stopped before its budget, the step it reached)."""
    beside = {f"ours ({run.config.run_id})": run, **{f"{task}: {r.config.run_id}": r for task, r in larger}}
    ours = {label: [f"{r.drop.plateau:.4f} (r/9 = {second_moment(r.config.data):.4f})",
                    f"{r.drop.half_step:,}" if r.drop.dropped else "none",
                    "{0.L:.2g} (L_obs {0.L_obs:.2g}, L_mask {0.L_mask:.3g})".format(final_losses(r.metrics)),
                    f"{r.last_step:,}"] for label, r in beside.items()}
    paper = [f"{SUDDEN_DROP['L_mask on the plateau']} (2/9 = {2 / 9:.4f})", f"~{SUDDEN_DROP['drop step']:,}",
             f"~{SUDDEN_DROP['final L']:g}", f"{named_preset('paper').train.steps:,}"]
    return pd.DataFrame({"paper (7x7, rank 2)": paper, **ours},
                        index=["L_mask on the plateau", "drop step (L_mask below half)",
                               f"final L (last {FINAL_STEPS} steps)", "steps"])


def partial_moves(tasks: dict[str, dict[int, Run]]) -> list[str]:
    """A sentence for each seed of the judged (largest) task that has no drop by the book's rule (L_mask below
    half its plateau) and yet ends off its plateau (below ``ON_PLATEAU`` of it): it left the plateau in part,
    which a count of drops does not show."""
    label, runs = list(tasks.items())[-1]
    return [f"{label} seed {seed} has no drop by the book's rule, yet ends {run.drop.factor:.2f}× below its plateau "
            f"at step {run.last_step:,}: it left its plateau in part, short of a drop."
            for seed, run in runs.items() if run.drop.half_step is None and run.drop.factor > 1 / ON_PLATEAU]


CHAPTER = ChapterSpec("sudden_drop", Parameters, runs_read, opening=Opening)
