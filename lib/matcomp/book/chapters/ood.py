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
from matcomp.book.tables import list_text, steps_text
from matcomp.config import RunConfig
from matcomp.models.factory import Model
from matcomp.presets import preset_config
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


def axis_table(relative: dict[str, pd.DataFrame], trained: dict[str, int]) -> pd.DataFrame:
    """Fig. 19's panels read, a row per axis (``relative``: axis -> L_mask / E[X²] by value, columns BERT and
    nuclear norm min; ``trained``: axis -> its trained value): where the model misses what nuclear-norm
    minimisation completes (``missed``), where it is behind nuclear-norm minimisation and where worst, where
    ahead, and where worse than answering 0 (≥ 1).

    >>> t = pd.DataFrame({"BERT": [0.3, 0.1, 0.8], NN: [0.2, 0.15, 0.15]}, index=[3, 4, 6])
    >>> axis_table({"rows": t}, {"rows": 4}).loc["rows"].to_dict()  # doctest: +NORMALIZE_WHITESPACE
    {'trained': 4, 'misses (BERT against nuclear-norm min.)': '6 (0.80 against 0.15)', 'behind nuclear-norm min. at':
    '3, 6', 'worst (BERT / nuclear-norm min.)': '6 (5.3×)', 'ahead at': '4', 'worse than answering 0 at': 'none'}
    """
    rows = {}
    for axis, table in relative.items():
        bert, nn = table[BERT], table[NN]
        behind = table.index[bert > nn]
        worst = (bert / nn)[behind].idxmax() if len(behind) else None
        misses = (f"{v} ({bert[v]:.2f} against {nn[v]:.2f})" for v in missed(table, trained[axis]))
        rows[axis] = {"trained": trained[axis], "misses (BERT against nuclear-norm min.)": "; ".join(misses) or "none",
                      "behind nuclear-norm min. at": list_text(behind),
                      "worst (BERT / nuclear-norm min.)": "none" if worst is None else
                      f"{worst} ({bert[worst] / nn[worst]:.1f}×)",
                      "ahead at": list_text(table.index[bert <= nn]),
                      "worse than answering 0 at": list_text(table.index[bert >= 1])}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("axis")


def distribution_values(by_distribution: pd.DataFrame) -> dict[str, str]:
    """What the sentence on other factor distributions quotes (keys ``ood_dist_*``; ``shifted_losses`` without a
    baseline, one row per variant, "trained" first): L_mask relative to E[X²] and absolute, each beside the
    trained one and which way it lies, since the paper's "similar" (App. J.2) is in absolute MSE and the shifted
    inputs have a smaller variance."""
    relative, absolute = by_distribution["L_mask / E[X²]"], by_distribution["L_mask"]
    trained, others = relative.index[0], list(relative.index[1:])

    def way(values: pd.Series) -> str:
        above = [v for v in others if values[v] > values[trained]]
        below = [v for v in others if v not in above]
        return "above the trained distribution's on " + list_text(above) + (" and below it on " + list_text(below)
                                                                          if below else "")

    return {"ood_dist_rel": f"{relative[trained]:.2f}",
            "ood_dist_rel_others": ", ".join(f"{relative[v]:.2f} on {v}" for v in others),
            "ood_dist_rel_way": way(relative), "ood_dist_abs": f"{absolute[trained]:.2e}",
            "ood_dist_abs_others": ", ".join(f"{absolute[v]:.2e} on {v}" for v in others),
            "ood_dist_abs_way": way(absolute)}


def twin_table(table: pd.DataFrame) -> pd.DataFrame:
    """Each Gaussian run's drop beside its uniform twin's, a row per seed of an ``analysis.ood.training_table``
    holding "uniform factors" and "Gaussian factors" runs, and how many steps later it is (blank where either has
    no drop within the table's budget).

    >>> index = pd.MultiIndex.from_product([["uniform factors", "Gaussian factors"], [0]], names=["factors", "seed"])
    >>> twin_table(pd.DataFrame({"drop step": pd.array([5060, 11866], dtype="Int64")}, index=index)).iloc[0].tolist()
    [5060, 11866, 6806]
    """
    drops = table["drop step"].unstack("factors")
    twins = pd.DataFrame({"uniform drop": drops["uniform factors"], "Gaussian drop": drops["Gaussian factors"]})
    twins = twins.loc[table.xs("Gaussian factors", level="factors").index]
    return twins.assign(**{"Gaussian − uniform (steps)": twins["Gaussian drop"] - twins["uniform drop"]})


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


def rows_values(relative: pd.DataFrame, trained: int, seed: int = 0) -> dict[str, str]:
    """What the sentence on the rows panel against the paper's reading of Fig. 19 ("close to the nuclear norm
    minimization solution" except when the number of columns changes) quotes (keys ``ood_rows_*``): at how many
    row counts other than the trained one the model misses where nuclear-norm minimisation completes (``missed``,
    a bound of the book's), the worst of them, and the verdict, by the book's rule on the one model read
    (``seed``): close to it at every such row count, within the book's tolerance either way (``Claim``), as
    "close to" a value asks.

    >>> v = rows_values(pd.DataFrame({"BERT": [0.3, 0.1, 0.8], NN: [0.2, 0.15, 0.15]}, index=[3, 4, 6]), 4)
    >>> v["ood_rows_misses"], v["ood_rows_worst"], v["ood_rows_close"]
    ('1 of 2', '6 rows, 0.80 against 0.15', '0 of 2')
    """
    bert, nn = relative[BERT], relative[NN]
    others = [v for v in relative.index if v != trained]
    misses = missed(relative, trained)
    close = [v for v in others if Claim(float(nn[v])).mark(float(bert[v])) == MATCHES]
    worst = max(misses, key=lambda v: bert[v] / nn[v]) if misses else None
    return {"ood_rows_misses": f"{len(misses)} of {len(others)}",
            "ood_rows_worst": "none" if worst is None else f"{worst} rows, {bert[worst]:.2f} against {nn[worst]:.2f}",
            "ood_rows_close": f"{len(close)} of {len(others)}",
            "ood_rows_verdict": str(holds({seed: len(close) == len(others)}))}


def derivations(preset: str) -> list[Derivation]:
    """The chapter's rank, rows and columns panels at ``preset`` with its default parameters: shipped for the
    default build."""
    p = Parameters()
    (_, after_drop), samples = p.counts(preset), p.matrices(preset)
    cfg = preset_config(preset)
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


def factor_table(table: pd.DataFrame, steps: int) -> pd.DataFrame:
    """A row per factor distribution of a ``training_table``: how many seeds fall below half the plateau within
    ``steps`` and where, and the range of the final L_mask / E[X²] over the seeds. "Does not drop" is said only
    of this budget, and only when no seed does: the count is of the seeds that do."""
    rows = {}
    for factors, group in table.groupby(level="factors", sort=False):
        drops = group["drop step"].dropna().astype(int).sort_values()
        ratio = group["final L_mask / E[X²]"]
        rows[factors] = {f"seeds that drop within {steps:,} steps": f"{len(drops)} of {len(group)}",
                         "at steps": steps_text(drops) or "none",
                         "final L_mask / E[X²]": f"{ratio.min():.2f}–{ratio.max():.2f}",
                         "seeds": ", ".join(map(str, group.index.get_level_values("seed")))}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("factors")


CHAPTER = ChapterSpec("ood", Parameters, runs_read, opening=Opening, derivations=derivations)
