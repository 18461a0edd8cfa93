"""The nuclear-norm chapter (NeurIPS §2, Fig. 2, Table 2): the model beside nuclear-norm minimisation and
ALS over p_mask and λ, and what it says of their tables."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np
import pandas as pd
from IPython.display import Markdown

from matcomp.analysis.baselines import (
    BERT,
    NN,
    TRUTH,
    draws_derivation,
    lambda_derivation,
    sweep_derivation,
)
from matcomp.analysis.key_numbers import read_nuclear, sweep_derivation_by_run
from matcomp.analysis.phases import Phases, phases
from matcomp.analysis.solvers import SOLVER
from matcomp.book.chapter import model_preset, open_chapter
from matcomp.book.chapters import model_chapter_configs
from matcomp.book.judging.verdicts import FALLS, GROWS, Claim
from matcomp.book.paper_model import paper_model
from matcomp.book.parameters import COUNT, MULTIPLE, MULTIPLES, RATES, SEED, parameter
from matcomp.book.spec import ChapterSpec, KeyNumber, KeyNumbers, OneModelParameters
from matcomp.book.tables import span_text
from matcomp.config import RunConfig
from matcomp.metrics import PAPER_ORDER
from matcomp.paper import LAMBDA_TABLE, Side
from matcomp.presets import preset_config
from matcomp.runs.derived import Derivation
from matcomp.runs.run import Run
from matcomp.runs.shipped import required_reference
from matcomp.sizes import chapter_sizes

BEST_LAMBDA = min(LAMBDA_TABLE, key=lambda lam: LAMBDA_TABLE[lam][2])  # App. B's best λ: the chapter's default


@dataclass(frozen=True)
class Parameters(OneModelParameters):
    """The parameters of the chapter's notebook (its ``parameters`` cell says what each does)."""

    # matrices per p_mask (the paper: 512); None: 512, or 32 at the smoke preset
    samples: int | None = parameter(None, COUNT)
    # matrices of each lambda table (the paper: 256); None: 256, or 32 at smoke
    lambda_samples: int | None = parameter(None, COUNT)
    # the paper's 11 values
    p_masks: list[float] = parameter([0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6], RATES)
    lams: list[float] = parameter([0.0005, 0.001, 0.0015, 0.002, 0.005], MULTIPLES)  # the lambdas of the paper's table
    # lambda of the regularised, soft-impute and ALS curves (the paper's best L)
    lam: float = parameter(BEST_LAMBDA, MULTIPLE)
    eval_seed: int = parameter(0, SEED)  # seed of the evaluation matrices
    # seeds eval_seed, eval_seed + 1, ... of the 7x7 table's sampling-noise check
    noise_seeds: int = parameter(8, COUNT)
    # processes for the convex solvers (512 7x7 problems: 3.8 s with 2, 6.7 s with 1, on 2 cores)
    workers: int = parameter(2, COUNT)

    def counts(self, preset: str | None) -> tuple[int, int]:
        """The matrices per p_mask and per λ table: these, or where None the scale's (the paper's 512 and 256 at
        the full scales)."""
        size = chapter_sizes(preset)
        return self.samples or size.completion_samples, self.lambda_samples or size.lambda_samples

    def at_scale(self, preset: str) -> Parameters:
        samples, lambda_samples = self.counts(preset)
        return replace(self, samples=samples, lambda_samples=lambda_samples)


class Opening(NamedTuple):
    """What ``setup`` opens: the config, run and phases, and the sample counts at the scale."""

    cfg: RunConfig
    run: Run
    phases: Phases
    samples: int
    lambda_samples: int


def setup(p: Parameters) -> Opening:
    """The chapter's config, run and phases, and its sample counts (None: the preset's, which are the
    paper's 512 per p_mask and 256 per λ table at the full scales)."""
    cfg, run, phases = open_chapter(model_preset(p.preset, p.one_model), p.seed, p.overrides)
    samples, lambda_samples = p.counts(p.preset)
    print(f"{cfg.run_id}: {cfg.data.n_rows}x{cfg.data.n_cols} rank {cfg.data.rank}, BERT trained at "
          f"p_mask {cfg.data.p_mask}, post-shift step {phases.post}; {samples} matrices per p_mask, "
          f"{lambda_samples} per lambda table; solver {SOLVER}")
    return Opening(cfg, run, phases, samples, lambda_samples)


def agreement_values(agree: pd.Series, at: float, lam: float) -> dict[str, str]:
    """What the sentence on the regularised problem's two solvers quotes (keys ``nn_agree_*``; its text is the
    notebook's), from a ``by_p_mask`` row of ``completion_sweep`` at p_mask ``at``, at the precision that shows
    the difference.

    >>> row = pd.Series({"gap max": 6.3e-12, "gap mean": -3.2e-10, "objective": 2.25e-3, "entry": 0.0213,
    ...                  "L change": 3.1e-5})
    >>> agreement_values(row, 0.3, 1e-3)  # doctest: +NORMALIZE_WHITESPACE
    {'nn_agree_at': '0.3', 'nn_agree_lam': '0.001', 'nn_agree_gap': '3.2e-10', 'nn_agree_objective': '2.25e-03',
     'nn_agree_entry': '0.021', 'nn_agree_L': '+3.1e-05'}
    """
    gap = max(abs(agree["gap max"]), abs(agree["gap mean"]))
    return {"nn_agree_at": f"{at:g}", "nn_agree_lam": f"{lam:g}", "nn_agree_gap": f"{gap:.1e}",
            "nn_agree_objective": f"{agree['objective']:.2e}", "nn_agree_entry": f"{agree['entry']:.2g}",
            "nn_agree_L": f"{agree['L change']:+.1e}"}


def matched_norms(sweep: pd.DataFrame, method: str = NN) -> pd.DataFrame:
    """The BERT's mean nuclear norm beside ``method``'s at the same MSE: for each p_mask of the sweep
    where the BERT's L lies within the range of ``method``'s L over the sweep, ``method``'s nuclear norm
    interpolated (linearly in log L between its two sweep points that bracket it) at the BERT's L, and
    the p_mask at which ``method`` has that L. Empty where the two losses do not overlap.

    >>> s = pd.DataFrame({"method": ["BERT"] * 2 + ["nuclear norm min"] * 2, "p_mask": [0.1, 0.2] * 2,
    ...                   "L": [0.02, 0.04, 0.01, 0.03], "nuclear_norm": [2.0, 2.2, 1.8, 1.6]})
    >>> matched_norms(s).round(3).to_dict("index")  # doctest: +NORMALIZE_WHITESPACE
    {0.1: {'L, BERT': 0.02, 'norm, BERT': 2.0, 'p_mask, nuclear norm min': 0.163,
           'norm, nuclear norm min': 1.674, 'norm ratio': 1.195}}
    """
    L = sweep.pivot(index="p_mask", columns="method", values="L")
    norm = sweep.pivot(index="p_mask", columns="method", values="nuclear_norm")
    other = pd.DataFrame({"L": L[method], "norm": norm[method], "p": L.index}).sort_values("L")
    rows = {}
    for p in L.index:
        loss = L.loc[p, BERT]
        if not other["L"].min() <= loss <= other["L"].max():
            continue
        x = np.log(other["L"].to_numpy())
        at = float(np.interp(np.log(loss), x, other["norm"].to_numpy()))
        rows[p] = {"L, BERT": loss, "norm, BERT": norm.loc[p, BERT],
                   f"p_mask, {method}": float(np.interp(np.log(loss), x, other["p"].to_numpy())),
                   f"norm, {method}": at, "norm ratio": norm.loc[p, BERT] / at}
    columns = ["L, BERT", "norm, BERT", f"p_mask, {method}", f"norm, {method}", "norm ratio"]
    return pd.DataFrame.from_dict(rows, orient="index", columns=columns).rename_axis("p_mask")


def norm_values(sweep: pd.DataFrame, matched: pd.DataFrame) -> dict[str, str | Markdown]:
    """What the sentences on the nuclear-norm half of the paper's claim quote (keys ``nn_norm_*``), read fairly:
    where the BERT's L is above nuclear-norm minimisation's at every p_mask, a larger nuclear norm is what a worse
    completion tends to have, so the norms are also set beside the true matrices' and compared at matched MSE
    (``matched_norms``, ``matched_text``, a sentence, so plain markdown)."""
    L = sweep.pivot(index="p_mask", columns="method", values="L")
    norm = sweep.pivot(index="p_mask", columns="method", values="nuclear_norm")
    span = lambda values: f"{values.min():.3g}–{values.max():.3g}"  # noqa: E731
    return {"nn_norm_larger": str(int((norm[BERT] > norm[NN]).sum())), "nn_norm_n": str(len(norm)),
            "nn_norm_bert": span(norm[BERT]), "nn_norm_nn": span(norm[NN]),
            "nn_norm_truth": f"{norm[TRUTH].mean():.3g}", "nn_norm_worse": str(int((L[BERT] > L[NN]).sum())),
            "nn_norm_bert_truth": str(int((norm[BERT] > norm[TRUTH]).sum())),
            "nn_norm_nn_truth": str(int((norm[NN] > norm[TRUTH]).sum())),
            "nn_norm_matched": Markdown(matched_text(sweep, matched))}


def matched_text(sweep: pd.DataFrame, matched: pd.DataFrame, label: str = "nuclear-norm minimisation") -> str:
    """The norms at matched MSE (``matched_norms``: the BERT's p_mask where its L lies within nuclear-norm
    minimisation's range over the sweep), or, where the losses do not overlap, that the norm half of the claim
    cannot be told from the MSE half on this run: a sentence whose shape follows the overlap."""
    if matched.empty:
        L = sweep.pivot(index="p_mask", columns="method", values="L")
        return (f"The two losses do not overlap (the BERT's L {L[BERT].min():.2e}–{L[BERT].max():.2e}, "
                f"{label}'s {L[NN].min():.2e}–{L[NN].max():.2e}), so on this run the norm half of the "
                "claim cannot be told apart from the MSE half.")
    ratio = matched["norm ratio"]
    side = ("larger" if (ratio > 1).all() else "smaller" if (ratio < 1).all()
            else "sometimes larger, sometimes smaller")
    return (f"At matched MSE (the BERT at p_mask {', '.join(f'{p:g}' for p in matched.index)}, where its L "
            f"lies within {label}'s range over the sweep), the BERT's norm is {side}: "
            f"{ratio.min():.3f}–{ratio.max():.3f} times {label}'s at the same L.")


def als_values(sweep: pd.DataFrame) -> dict[str, str]:
    """How far below every other method (the truth aside) the rank-r ALS oracle's L is, and at which p_mask most
    and least (keys ``nn_als_*``)."""
    L = sweep.pivot(index="p_mask", columns="method", values="L")
    als = next(method for method in L if "ALS" in method)
    beaten = L.drop(columns=[als, TRUTH]).min(axis=1) / L[als]
    return {"nn_als_span": f"{beaten.min():.1f}–{beaten.max():.1f}", "nn_als_most": f"{beaten.idxmax():g}",
            "nn_als_least": f"{beaten.idxmin():g}"}


def lambda_values(ours: pd.DataFrame, theirs: pd.DataFrame, draws: pd.DataFrame, lam: float, seed: int,
                  paper_L: float) -> dict[str, str]:
    """What the sentences on the λ table quote (keys ``nn_lam_*``): each loss's relative difference from the
    paper's across λ, the shape of L over λ, where the chapter's draw (``seed``) falls among ``draws`` (a clause,
    empty where it is not among them) and their mean against the paper's L."""
    metrics = list(PAPER_ORDER)
    ratio = ours[metrics] / theirs.loc[ours.index, metrics] - 1
    error = (ours[[f"{m} se" for m in metrics]].to_numpy() / ours[metrics]).max()
    best = ours["L"].min()
    within = ours.index[ours["L"] <= best * (1 + error["L"])]
    spreads = (draws["L"].mean() - paper_L) / draws["L"].std()
    return {"nn_lam_vs_paper": "; ".join(f"{m} {span_text(ratio[m], '{:+.0%}', ' to ')} (s.e. ±{error[m]:.0%})"
                                         for m in metrics),
            "nn_lam_within": ", ".join(within), "nn_lam_worst": f"{ours['L'].max() / best:.1f}",
            "nn_lam_worst_at": str(ours["L"].idxmax()), "nn_lam_draw": draw_place(draws, seed),
            "nn_lam_lam": f"{lam:g}", "nn_lam_mean": f"{draws['L'].mean() / paper_L - 1:+.0%}",
            "nn_lam_spreads": f"{abs(spreads):.1f}", "nn_lam_side": "below" if spreads < 0 else "above"}


def draw_place(draws: pd.DataFrame, seed: int) -> str:
    """Where the chapter's draw (``seed``) ranks by L among ``draws`` (a clause ending in ";"), empty where it is
    not among them.

    >>> draw_place(pd.DataFrame({"L": [1.5, 1.2, 1.8]}), 0)
    "The chapter's draw (seed 0) has the 2nd lowest L of 3 draws;"
    """
    if seed not in draws.index:
        return ""
    rank = int((draws["L"] < draws.loc[seed, "L"]).sum()) + 1
    return f"The chapter's draw (seed {seed}) has the {'' if rank == 1 else _ordinal(rank) + ' '}lowest L of " \
           f"{len(draws)} draws;"


def _ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, ...

    >>> [_ordinal(n) for n in (1, 2, 3, 4, 11, 12, 21)]
    ['1st', '2nd', '3rd', '4th', '11th', '12th', '21st']
    """
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def versus_values(versus: pd.DataFrame, at: float) -> dict[str, str]:
    """What the sentence reading a ``matcomp.analysis.baselines.versus_table`` quotes (keys ``nn_vs_*``): where the
    BERT's L is below the other method's and where that is resolved (more than 2 paired s.e.), which way it goes
    at the training p_mask ``at``, where it is behind by more than 2 s.e., and at how many p_mask its nuclear
    norm is the larger. Resolution is said only where it is true; "no p_mask" rather than an empty list.

    >>> v = pd.DataFrame({"L gap (NN − BERT)": [0.002, -0.001, -0.004], "gap / s.e.": [3.0, -1.0, -5.0],
    ...                   "norm, BERT": [2.0, 2.0, 2.0], "norm, x": [1.0, 1.0, 3.0]}, index=[0.1, 0.3, 0.5])
    >>> versus_values(v, at=0.3)  # doctest: +NORMALIZE_WHITESPACE
    {'nn_vs_where': 'at p_mask 0.1 (by more than 2 paired s.e. at 0.1)', 'nn_vs_at': '0.3', 'nn_vs_side': 'behind',
     'nn_vs_z': '1.0', 'nn_vs_behind': '0.5', 'nn_vs_larger': '2', 'nn_vs_n': '3'}
    """
    def listed(index) -> str:
        return ", ".join(f"{p:g}" for p in index)

    gap, z = versus["L gap (NN − BERT)"], versus["gap / s.e."]
    ahead, resolved, behind = versus.index[gap > 0], versus.index[z > 2], versus.index[z < -2]
    where = (f"at p_mask {listed(ahead)} (by more than 2 paired s.e. at {listed(resolved) or 'none of them'})"
             if len(ahead) else "at no p_mask")
    other = next(column for column in versus if column.startswith("norm, ") and column != "norm, BERT")
    return {"nn_vs_where": where, "nn_vs_at": f"{at:g}", "nn_vs_side": "ahead" if gap.loc[at] > 0 else "behind",
            "nn_vs_z": f"{abs(z.loc[at]):.1f}", "nn_vs_behind": listed(behind) or "no p_mask",
            "nn_vs_larger": str(int((versus["norm, BERT"] > versus[other]).sum())), "nn_vs_n": str(len(versus))}


# Each number sets the BERT's loss against a fixed solver's, so training, which still lowers the BERT's loss, moves
# each one way: BERT / NN falls, the share of rates where BERT is ahead and regularised / BERT grow.
KEY_NUMBERS = KeyNumbers(read_nuclear, (
    KeyNumber("bert_over_nn", f"L: BERT / {NN}", Claim(Side(1, above=False, strict=True), training=FALLS),
              tests=("bert_beats_nuclear_norm",)),
    # Fig. 3 shows BERT ahead at every rate; "beyond 2 s.e." is our test of it
    KeyNumber("rates_beaten_share", f"masking rates where BERT beats {NN} beyond 2 s.e.: share",
              Claim(Side(1.0), ours=True, training=GROWS), tests=("bert_beats_nuclear_norm",)),  # every rate
    # "BERT still outperforms regularized MSE minimization" (§3.2, App. B): one-sided; the paper prints no ratio
    KeyNumber("regularised_over_bert", "L: regularised / BERT", Claim(Side(1, strict=True), training=GROWS),
              tests=("bert_beats_regularised",))))


def paper_sweep_derivation(preset: str | None = None, parameters: Parameters | None = None) -> Derivation | None:
    """The chapter's sweep (``sweep_derivation``, with ``parameters``, default the chapter's) on the paper's model,
    its last checkpoint, where it is shipped with checkpoints (``paper_model``), else None: its Fig. 3 beside the
    stand-in's, and the table its key numbers read (``sweep_derivation_by_run``: named by its run)."""
    paper = paper_model(preset)
    if paper is None:
        return None
    p = parameters or Parameters()
    samples, _ = p.counts(preset)
    return sweep_derivation_by_run(paper[0], paper[1].post, p.p_masks, samples, p.lam, p.eval_seed, p.workers)


def derivations(preset: str) -> list[Derivation]:
    """The chapter's sweep and λ tables at ``preset`` with its default parameters, and the sweep of the paper's model
    where it is shipped: shipped for the default build."""
    p = Parameters()
    samples, lambda_samples = p.counts(preset)
    run = required_reference(preset_config(model_preset(preset, p.one_model)))
    post = phases(run).post
    paper_data, seed, workers = preset_config("paper").data, p.eval_seed, p.workers
    return [sweep_derivation(run, post, p.p_masks, samples, p.lam, seed, workers),
            lambda_derivation(paper_data, p.lams, lambda_samples, seed, workers=workers),
            draws_derivation(paper_data, p.lam, lambda_samples, range(seed, seed + p.noise_seeds), workers),
            lambda_derivation(run.config.data, p.lams, lambda_samples, seed, run=run, step=post,
                              label=f"BERT (step {post})", workers=workers),
            *filter(None, [paper_sweep_derivation(preset, p)])]


CHAPTER = ChapterSpec("nuclear_norm", Parameters, model_chapter_configs, opening=Opening, key_numbers=KEY_NUMBERS,
                      derivations=derivations)
