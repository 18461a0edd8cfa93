"""The sudden-drop chapter (NeurIPS §2, Fig. 1): the model's loss curves, its plateau and drop, and the
drop step over many seeds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import pandas as pd

from matcomp.analysis import drop_spread
from matcomp.analysis.key_numbers import read_drop
from matcomp.analysis.seeds import seed_configs, seeds_from, trained_on
from matcomp.book.chapter import chapter_config, model_preset, open_run, open_runs, paper_task_runs
from matcomp.book.chapters import model_chapter_configs, seed_part_configs
from matcomp.book.judging.ladder import DEPTH
from matcomp.book.judging.verdicts import Claim
from matcomp.book.parameters import COUNT, parameter
from matcomp.book.spec import ChapterSpec, KeyNumber, KeyNumbers, OneModelParameters
from matcomp.config import RunConfig
from matcomp.data import second_moment
from matcomp.drop import FINAL_STEPS, ON_PLATEAU, final_losses
from matcomp.paper import SUDDEN_DROP, Side
from matcomp.presets import preset_config
from matcomp.runs.run import Run
from matcomp.sizes import chapter_sizes


@dataclass(frozen=True)
class Parameters(OneModelParameters):
    """The parameters of the chapter's notebook (its ``parameters`` cell says what each does)."""

    # how many seeds (from `seed` on) of the scale's preset for the drop steps; None: the preset's (cpu: 8)
    seeds: int | None = parameter(None, COUNT)


def runs_read(preset: str) -> list[RunConfig]:
    """The one-model runs (the chapter's model and its ladder), the scale's drop-step seeds, then their first seeds
    with one weight nudged (where the scale measures it)."""
    nudged = nudged_configs(chapter_config(preset), preset)
    return model_chapter_configs(preset) + seed_part_configs(preset, "drop_seeds") + list(nudged.values())


def nudged_configs(seed_cfg: RunConfig, preset: str | None) -> dict[tuple[int, str], RunConfig]:
    """The runs of the drop step's spread under rounding: the first ``drop_spread.SEEDS`` seeds of ``seed_cfg``,
    each with each of the scale's ``ChapterSizes.nudged`` weights nudged; none where the scale measures no spread,
    or where ``seed_cfg`` is not the scale's own configuration at its own seed (a sweep's point: its nudged runs
    would be new runs to train, 8 a seed)."""
    count = chapter_sizes(preset).nudged
    if not count or seed_cfg != chapter_config(preset):
        return {}
    return drop_spread.nudged_configs(seed_cfg, seeds_from(seed_cfg, drop_spread.SEEDS), count)


class Nudged(NamedTuple):
    """The drop step's spread under rounding: each nudged run's drop step (``drop_spread.nudged_steps``), its
    seed's own drop step, and the two as a table a seed a row (``drop_spread.spread_table``)."""

    steps: pd.DataFrame
    own: pd.Series
    table: pd.DataFrame


def nudged_spread(seed_cfg: RunConfig, preset: str | None) -> Nudged | None:
    """The nudged runs of ``seed_cfg`` (opened, or trained) beside their seeds' own runs; None where the scale
    does not measure the spread."""
    nudged = nudged_configs(seed_cfg, preset)
    if not nudged:
        return None
    own_runs = open_runs(seed_configs(seed_cfg, seeds_from(seed_cfg, drop_spread.SEEDS)), preset)
    steps = drop_spread.nudged_steps(open_runs(nudged, preset))
    own = pd.Series({seed: run.drop.half_step for seed, run in own_runs.items()}, dtype="Float64")
    return Nudged(steps, own, drop_spread.spread_table(steps, own))


def paper_seed_runs(preset: str | None) -> list[Run]:
    """The shipped runs of the ``paper`` preset at its own seed: the paper's model trained more than once (on lent
    GPUs, by different engines), each one draw of its drop step."""
    seed = preset_config("paper").train.seed
    return [run for _, run in paper_task_runs(preset) if run.config.name == "paper" and run.config.train.seed == seed]


def spread_sentences(nudged: Nudged | None, paper_runs: list[Run]) -> list[str]:
    """Where the nudged runs' spread was measured, where not at these parameters (each nudged seed's spread is its
    table's, ``nudged_spread``), and the drop steps of the paper's seed trained more than once
    (``paper_seed_runs``)."""
    said = [] if nudged is not None else [
        "The drop step's spread under rounding is measured on the `cpu` scale's own configuration at its own seeds "
        "(16 runs, shipped), not at these parameters."]
    drops = _drops(paper_runs)
    if len(drops) > 1:
        times = {2: "twice", 3: "three times"}.get(len(drops), f"{len(drops)} times")
        said.append(f"The paper's 7×7 rank-2 model, seed {paper_runs[0].config.train.seed}, trained {times} on a GPU "
                    f"from the same initial weights and batches, its steps computed by different engines (differences "
                    f"at the level of rounding), dropped at steps {', '.join(f'{d:,}' for d in drops[:-1])} and "
                    f"{drops[-1]:,}: {drops[-1] / drops[0]:.2f}× apart.")
    return said


def _drops(runs: list[Run]) -> list[int]:
    """The drop steps of those of ``runs`` that drop, earliest first."""
    return sorted(step for run in runs if (step := run.drop.half_step) is not None)


def spread_rows(by_seed: pd.DataFrame, nudged: Nudged | None, paper_runs: list[Run]) -> dict[str, pd.Series]:
    """The drop steps the spread figure compares, each row as multiples of its reference: the scale's seeds beside
    their median, each nudged seed's runs beside its own run, and the paper's seed trained more than once beside
    its first drop."""
    steps = by_seed["drop step"].dropna().astype(float)
    rows = {f"the {len(steps)} seeds that drop ÷ their median": steps / steps.median()} if len(steps) else {}
    if nudged is not None:
        for seed, own in nudged.own.items():
            rows[f"seed {seed}, nudged ÷ its own run"] = nudged.steps.xs(seed, level="seed")["drop step"] / own
    drops = pd.Series(_drops(paper_runs), dtype=float)
    if len(drops) > 1:
        label = f"paper 7×7, seed {paper_runs[0].config.train.seed}, {len(drops)} trainings ÷ the first"
        rows[label] = drops / drops[0]
    return rows


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
    cfg = chapter_config(model_preset(p.preset, p.one_model), p.seed, p.overrides)
    seed_cfg = chapter_config(p.preset, p.seed, p.overrides)  # the drop-step distribution: the scale's own preset
    seeds = p.seeds or chapter_sizes(p.preset).drop_seeds
    run = open_run(cfg, p.preset)  # a shipped or stored run loads in a second; any other trains
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
             f"~{SUDDEN_DROP['final L']:g}", f"{preset_config('paper').train.steps:,}"]
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


# The drop's numbers as the paper gives them (NeurIPS §3, Fig. 2), read on each run's metrics alone: its plateau
# against the copying level E[X²] (where any copying model sits: a check), its drop step (one draw, as the paper's
# is) and how far below its plateau it ends (``DEPTH``, shown on every one-model ladder too)
KEY_NUMBERS = KeyNumbers(read_drop, (
    KeyNumber("plateau_share", "plateau / E[X²]",
              Claim(SUDDEN_DROP["L_mask on the plateau"] / second_moment(preset_config("paper").data)),
              check="a check: any model that copies its input sits at E[X²]",
              tests=("plateau_then_sudden_drop", "plateau_level")),
    KeyNumber("drop_step", "drop step", Claim(float(SUDDEN_DROP["drop step"]), drawn=True),
              tests=("plateau_then_sudden_drop", "drop_step")),
    # "suddenly and sharply" (Abstract, §1), no number: a fall shorter than the plateau, the components page's rule
    KeyNumber("fall_over_plateau", "fall to half its plateau / steps on it",
              Claim(Side(1, above=False, strict=True), ours=True), tests=("plateau_then_sudden_drop",)),
    DEPTH), metrics_only=True)


CHAPTER = ChapterSpec("sudden_drop", Parameters, runs_read, opening=Opening, key_numbers=KEY_NUMBERS)
