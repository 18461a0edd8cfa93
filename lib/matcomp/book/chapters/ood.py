"""The out-of-distribution chapter (NeurIPS §4, Fig. 9): the trained model on shifted factors, ranks,
sizes and masks beside nuclear-norm minimisation, and training on Gaussian factors; and what it says of them."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

import pandas as pd

from matcomp.analysis.baselines import BERT, NN
from matcomp.analysis.ood import default_axes, gaussian_config, panel_derivations, rank_panel, rank_panel_config
from matcomp.analysis.phases import Phases, phases
from matcomp.book.chapter import chapter_config, open_chapter
from matcomp.book.chapters import seed_part_configs
from matcomp.book.judging.verdicts import MATCHES, Claim, holds
from matcomp.book.paper_model import paper_model
from matcomp.book.parameters import COUNT, STEP, STEPS, parameter
from matcomp.book.spec import ChapterSpec, RunParameters
from matcomp.config import RunConfig
from matcomp.models.factory import Model
from matcomp.presets import preset as named_preset
from matcomp.runs.derived import Derivation, load_or_compute
from matcomp.runs.run import Run
from matcomp.runs.shipped import required_reference
from matcomp.sizes import ChapterSizes, chapter_sizes


@dataclass(frozen=True)
class Parameters(RunParameters):
    """The parameters of the chapter's notebook (its ``parameters`` cell says what each does)."""

    # matrices per variant (the authors' App. J script draws 1,024: `src/configs/ood.yaml:30`); None: 1,024, or 64
    # at the smoke preset
    samples: int | None = parameter(None, COUNT)
    reach: int = parameter(2, COUNT)  # rows and columns from trained - reach to trained + reach
    seeds: int | None = parameter(None, COUNT)  # seeds trained on each factor distribution; None: the preset's (cpu: 3)
    # budget of each run trained on Gaussian factors; None: the preset's (cpu: 20,000)
    gaussian_steps: int | None = parameter(None, STEPS)
    # steps a run trains past its drop (train.stop_after_drop); None: the preset's
    after_drop: int | None = parameter(None, STEP)

    def counts(self, preset: str | None) -> tuple[int, int]:
        """The seeds and the steps past the drop of the several-seed runs: these, or where None the scale's."""
        size = chapter_sizes(preset)
        return self.seeds or size.seeds, size.after_drop if self.after_drop is None else self.after_drop

    def matrices(self, preset: str | None) -> int:
        """The matrices per variant: ``samples``, or where None the scale's."""
        return self.samples or chapter_sizes(preset).ood_samples

    def at_scale(self, preset: str) -> Parameters:
        return replace(self, samples=self.matrices(preset))


def runs_read(preset: str) -> list[RunConfig]:
    """The scale's seeds on uniform factors, their twins on Gaussian factors, and the rank panel's run."""
    cfg, size, uniform = chapter_config(preset), chapter_sizes(preset), seed_part_configs(preset)
    gaussian = [gaussian_config(seed_cfg, size.steps("gaussian_steps", cfg), size.after_drop) for seed_cfg in uniform]
    rank_run = rank_panel_config(cfg, cfg.train.steps, size.after_drop)
    return [*uniform, *gaussian, *([rank_run] if rank_run else [])]


class Opening(NamedTuple):
    """What ``setup`` opens: the config, run and phases, the scale's sizes, the seeds and steps past the drop of
    the several-seed runs, the matrices per variant, and the post-shift model."""

    cfg: RunConfig
    run: Run
    phases: Phases
    size: ChapterSizes
    seeds: int
    after_drop: int
    samples: int
    model: Model


def setup(p: Parameters) -> Opening:
    """The chapter's config, run and phases (at the scale's own preset), its sizes, the seeds and steps past
    the drop of its several-seed runs (None: the preset's), and the post-shift model."""
    cfg, run, phases = open_chapter(p.preset, p.seed, p.overrides)
    seeds, after_drop = p.counts(p.preset)
    return Opening(cfg, run, phases, chapter_sizes(p.preset), seeds, after_drop, p.matrices(p.preset),
                   run.checkpoint(phases.post))


MISS = 0.5  # L_mask / E[X²] at or above this is a miss: the completion recovers less than half of E[X²]


def missed(relative: pd.DataFrame, trained: int) -> list:
    """The values other than the trained one where the model misses what nuclear-norm minimisation completes: it
    recovers less than half of E[X²] (``MISS``) where that recovers more, or it does worse than answering 0 (1)
    where that does better.

    >>> missed(pd.DataFrame({"BERT": [0.3, 0.8, 1.21], NN: [0.2, 0.15, 0.60]}, index=[1, 3, 2]), 1)
    [3, 2]
    """
    bert, nn = relative[BERT], relative[NN]
    return [v for v in relative.index if v != trained and (bert[v] >= MISS > nn[v] or bert[v] >= 1 > nn[v])]


def axis_verdicts(relative: pd.DataFrame, axis: str, trained: int) -> str:
    """One sentence on one Fig. 19 panel (``relative``: L_mask / E[X²], one row per value of ``axis``,
    columns BERT and nuclear norm min): at each value other than the trained one, whether the model
    misses what nuclear-norm minimisation completes (``missed``), is worse than answering 0 (≥ 1), and by how
    much nuclear-norm minimisation is ahead.

    >>> t = pd.DataFrame({"BERT": [0.3, 0.1, 0.8], NN: [0.2, 0.15, 0.15]}, index=[3, 4, 6])
    >>> for clause in axis_verdicts(t, "rows", 4).split("; "): print(clause)
    By rows (trained: 4): the model misses at 6 (0.80 against nuclear-norm minimisation's 0.15)
    it is behind nuclear-norm minimisation at 3, 6 (worst at 6, 5.3×) and ahead at 4
    worse than answering 0 at none.
    """
    bert, nn = relative[BERT], relative[NN]
    misses = missed(relative, trained)
    behind, ahead = relative.index[bert > nn], relative.index[bert <= nn]
    listed = lambda values: ", ".join(map(str, values)) or "none"  # noqa: E731
    if misses:
        miss = "; ".join(f"{v} ({bert[v]:.2f} against nuclear-norm minimisation's {nn[v]:.2f})" for v in misses)
        text = f"By {axis} (trained: {trained}): the model misses at {miss}; "
    else:
        text = f"By {axis} (trained: {trained}): no miss (L_mask / E[X²] ≥ {MISS} (ours), or ≥ 1, where nuclear-norm " \
               f"minimisation is below it); "
    worst = (bert / nn)[behind].idxmax() if len(behind) else None
    text += (f"it is behind nuclear-norm minimisation at {listed(behind)}"
             + (f" (worst at {worst}, {bert[worst] / nn[worst]:.1f}×)" if worst is not None else "")
             + f" and ahead at {listed(ahead)}; worse than answering 0 at {listed(relative.index[bert >= 1])}.")
    return text


def distribution_findings(by_distribution: pd.DataFrame) -> str:
    """How the model does on other factor distributions (``shifted_losses`` without a baseline, one row per
    variant, "trained" first): relative to E[X²] and in absolute L_mask, each beside the trained one, since
    the paper's "similar" (App. J.2) is in absolute MSE and the shifted inputs have a smaller variance."""
    relative, absolute = by_distribution["L_mask / E[X²]"], by_distribution["L_mask"]
    trained, others = relative.index[0], list(relative.index[1:])
    def way(values: pd.Series) -> str:
        above = [v for v in others if values[v] > values[trained]]
        return ("above the trained distribution's on " + (", ".join(above) if above else "none")
                + (f" and below it on {', '.join(v for v in others if v not in above)}" if len(above) < len(others)
                   else ""))

    return (f"Relative to E[X²], the model's L_mask is {relative[trained]:.2f} in distribution and "
            + ", ".join(f"{relative[v]:.2f} on {v}" for v in others) + f" factors: {way(relative)}. In absolute "
            f"L_mask ({absolute[trained]:.2e} in distribution, "
            + ", ".join(f"{absolute[v]:.2e} on {v}" for v in others) + f") it is {way(absolute)}.")


def twin_findings(table: pd.DataFrame, steps: int) -> list[str]:
    """One sentence per seed of an ``analysis.ood.training_table`` holding "uniform factors" and "Gaussian
    factors" runs: the Gaussian run's drop beside its uniform twin's (how many steps later or earlier),
    or that it has none within ``steps`` while its twin dropped."""
    sentences = []
    drops = table["drop step"]
    for seed in table.xs("Gaussian factors", level="factors").index:
        uniform, gaussian = drops.get(("uniform factors", seed)), drops.get(("Gaussian factors", seed))
        twin = "no drop" if pd.isna(uniform) else f"a drop at {int(uniform):,}"
        if pd.isna(gaussian):
            sentences.append(f"Seed {seed}: on Gaussian factors no drop within {steps:,} steps; its uniform twin: "
                             f"{twin}.")
        elif pd.isna(uniform):
            sentences.append(f"Seed {seed}: on Gaussian factors a drop at {int(gaussian):,}; its uniform twin: {twin}.")
        else:
            lag = int(gaussian) - int(uniform)
            sentences.append(f"Seed {seed}: on Gaussian factors a drop at {int(gaussian):,}, {abs(lag):,} steps "
                             f"{'after' if lag >= 0 else 'before'} its uniform twin's ({int(uniform):,}).")
    return sentences


def rank_note(extrapolated: bool, rank: int, trained: int, n_rows: int, n_cols: int, p_mask: float) -> str:
    """Why the rank panel reads the model it does. Where it extrapolates (the rank-``rank`` run has not
    dropped, so the panel reads the model trained on rank ``trained``): how many degrees of freedom a
    rank-``rank`` matrix of the shape has, r(m + n − r), against the entries seen on average, (1 − p_mask) m n.

    >>> rank_note(True, 2, 1, 4, 4, 0.3)[:88]
    'The paper reads its rank sweep on a model trained on rank 2 (NeurIPS Fig. 19). Our rank-'
    """
    if not extrapolated:
        return f"The rank panel reads a model trained on rank {rank}, as the paper's (NeurIPS Fig. 19)."
    freedom, seen = rank * (n_rows + n_cols - rank), (1 - p_mask) * n_rows * n_cols
    return (f"The paper reads its rank sweep on a model trained on rank {rank} (NeurIPS Fig. 19). Our "
            f"rank-{rank} run of the default shape has not left its plateau (a {n_rows}×{n_cols} rank-{rank} matrix "
            f"has {freedom} degrees of freedom and about {seen:.0f} of its {n_rows * n_cols} entries are seen, so "
            f"many of its missing "
            f"entries are undetermined), so the panel reads the rank-{trained} model and is titled as an "
            f"extrapolation, which says nothing against the paper's claim: that needs a rank-{rank} model that has "
            f"dropped.")


def rows_summary(relative: pd.DataFrame, trained: int, seed: int = 0) -> str:
    """The rows panel against the paper's reading of Fig. 19 ("close to the nuclear norm minimization solution"
    except when the number of columns changes): at how many row counts other than the trained one the
    model misses where nuclear-norm minimisation completes (``axis_verdicts``' rule, a bound of the book's), the
    worst of them, and the verdict, by the book's rule on the one model read (``seed``): close to it at every such
    row count, within the book's tolerance either way (``Claim``), as "close to" a value asks.

    >>> rows_summary(pd.DataFrame({"BERT": [0.3, 0.1, 0.8], NN: [0.2, 0.15, 0.15]}, index=[3, 4, 6]), 4)[:90]
    "The model misses (by the book's threshold) at 1 of 2 row counts other than the trained one"
    """
    bert, nn = relative[BERT], relative[NN]
    others = [v for v in relative.index if v != trained]
    misses = missed(relative, trained)
    close = [v for v in others if Claim(float(nn[v])).mark(float(bert[v])) == MATCHES]
    claim = (f"\"close to the nuclear norm minimization solution\" (Fig. 19) with the rows, at {len(close)} of "
             f"{len(others)} row counts within the book's tolerance, read on this one model: "
             f"{holds({seed: len(close) == len(others)})}")
    if not misses:
        return (f"The model misses (by the book's threshold) at none of the {len(others)} row counts other than the "
                f"trained one; the paper's {claim}.")
    worst = max(misses, key=lambda v: bert[v] / nn[v])
    return (f"The model misses (by the book's threshold) at {len(misses)} of {len(others)} row counts other than "
            f"the trained one, worst at {worst} rows ({bert[worst]:.2f} against {nn[worst]:.2f}); the paper's {claim}.")


def derivations(preset: str) -> list[Derivation]:
    """The chapter's rank, rows and columns panels at ``preset`` with its default parameters: shipped for the
    default build."""
    p = Parameters()
    (_, after_drop), samples = p.counts(preset), p.matrices(preset)
    cfg = named_preset(preset)
    run = required_reference(cfg)
    post = phases(run).post
    rank_cfg = rank_panel_config(cfg, cfg.train.steps, after_drop)
    rank_run, rank_step, _ = rank_panel(run, post, None if rank_cfg is None else required_reference(rank_cfg))
    axes = default_axes(cfg.data, p.reach)
    ours = panel_derivations(run, post, rank_run, rank_step, cfg.data, axes, samples, cfg.train.seed)
    return [*ours.values(), *paper_panel_derivations(preset, samples, p.reach).values()]


def paper_panel_derivations(preset: str | None, samples: int, reach: int) -> dict[str, Derivation]:
    """Fig. 19's panels on the paper's model, its last checkpoint, where the scale ships it with checkpoints
    (``paper_model``), else none: trained on rank 2, it reads its own rank panel. Minutes of forward passes of a
    768-wide model on a CPU, so shipped; named by its run, so that its tables never replace the stand-in's."""
    paper = paper_model(preset)
    if paper is None:
        return {}
    run, post, data = paper[0], paper[1].post, paper[0].config.data
    panels = panel_derivations(run, post, run, post, data, default_axes(data, reach), samples, run.config.train.seed)
    return {axis: replace(d, name=f"{d.name}_{run.path.name}") for axis, d in panels.items()}


def relative_losses(tables: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """Each panel's L_mask / E[X²] (``tables``: axis -> a ``shifted_losses`` table), a column per method, a row per
    value of its axis."""
    return {axis: table["L_mask / E[X²]"].unstack("method").rename_axis(axis) for axis, table in tables.items()}


def paper_panels(preset: str | None, samples: int, reach: int) -> dict[str, pd.DataFrame] | None:
    """``paper_panel_derivations``' tables (axis -> a ``shifted_losses`` table): shipped, stored, or computed and
    stored; None where the scale ships no paper model."""
    derivations = paper_panel_derivations(preset, samples, reach)
    return {axis: load_or_compute(d)["losses"] for axis, d in derivations.items()} or None


def drops_by_factors(table: pd.DataFrame, steps: int) -> list[str]:
    """One sentence per factor distribution of a ``training_table``: how many seeds drop within
    ``steps`` and where, and the final L_mask / E[X²]. "Does not drop" is said only when no seed does,
    and then only of this budget."""
    lines = []
    for factors, rows in table.groupby(level="factors", sort=False):
        drops = rows["drop step"].dropna().astype(int).sort_values()
        where = f" (steps {', '.join(f'{s:,}' for s in drops)})" if len(drops) else ""
        verdict = (f"no seed falls below half the plateau within {steps:,} steps" if not len(drops) else
                   f"{len(drops)} of {len(rows)} seeds fall below half the plateau within {steps:,} steps{where}")
        ratio = rows["final L_mask / E[X²]"]
        lines.append(f"{factors}: {verdict}; final L_mask / E[X²] {ratio.min():.2f}–{ratio.max():.2f} over "
                     f"seeds {', '.join(map(str, rows.index.get_level_values('seed')))}.")
    return lines


CHAPTER = ChapterSpec("ood", Parameters, runs_read, opening=Opening, derivations=derivations)
