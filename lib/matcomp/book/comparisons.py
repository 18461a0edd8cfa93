"""What the ``nuclear_norm`` and ``ood`` chapters say about their own tables, computed from them: the
solvers' agreement, the BERT's nuclear norm against nuclear-norm minimisation's at matched MSE, the
ALS oracle's margin, the λ table against the paper's, and the out-of-distribution panels' verdicts
(where the model misses what nuclear-norm minimisation completes). Sentences and glued numbers, so
the prose stays true of the tables at every preset."""

from __future__ import annotations

import numpy as np
import pandas as pd

from matcomp.analysis.baselines import BERT, NN, TRUTH
from matcomp.book.verdicts import holds
from matcomp.metrics import PAPER_ORDER

MISS = 0.5  # L_mask / E[X²] at or above this is a miss: the completion recovers less than half of E[X²]


def agreement_text(agree: pd.Series, at: float, lam: float) -> str:
    """How the regularised problem's two solvers agree at one p_mask (a ``by_p_mask`` row of
    ``completion_sweep``), said at the precision that shows the difference.

    >>> row = pd.Series({"gap max": 6.3e-12, "gap mean": -3.2e-10, "objective": 2.25e-3, "entry": 0.0213,
    ...                  "L change": 3.1e-5})
    >>> for clause in agreement_text(row, 0.3, 1e-3).split("; "): print(clause)  # doctest: +ELLIPSIS
    At p_mask 0.3, λ = 0.001, soft-impute reaches ... to within 3.2e-10 (the objective: 2.25e-03)
    their completions differ by up to 0.021 in an entry, and their pooled L by a relative +3.1e-05.
    """
    gap = max(abs(agree["gap max"]), abs(agree["gap mean"]))
    return (f"At p_mask {at:g}, λ = {lam:g}, soft-impute reaches the interior-point solver's objective to within "
            f"{gap:.1e} (the objective: {agree['objective']:.2e}); their completions differ by up to "
            f"{agree['entry']:.2g} in an entry, and their pooled L by a relative {agree['L change']:+.1e}.")


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


def norm_findings(sweep: pd.DataFrame, matched: pd.DataFrame, method: str = NN,
                  label: str = "nuclear-norm minimisation") -> str:
    """The nuclear-norm half of the paper's claim, read fairly: where the BERT's L is above ``method``'s
    at every p_mask, a larger nuclear norm is what a worse completion tends to have, so the norms are
    compared at matched MSE (``matched_norms``) where the losses overlap, and the verdict says so."""
    L = sweep.pivot(index="p_mask", columns="method", values="L")
    norm = sweep.pivot(index="p_mask", columns="method", values="nuclear_norm")
    larger = int((norm[BERT] > norm[method]).sum())
    worse = int((L[BERT] > L[method]).sum())
    truth = norm[TRUTH].mean() if TRUTH in norm else float("nan")
    text = (f"The BERT's mean nuclear norm is above {label}'s at {larger} of {len(norm)} values of p_mask "
            f"({norm[BERT].min():.3g}–{norm[BERT].max():.3g} against {norm[method].min():.3g}–"
            f"{norm[method].max():.3g}; the true matrices' {truth:.3g}), but its L is also the higher at {worse} of "
            f"{len(L)}, and a worse completion tends to have the larger norm. ")
    if TRUTH in norm:
        text += (f"The true matrices' norm is a reference free of that: the BERT's is above it at "
                 f"{int((norm[BERT] > norm[TRUTH]).sum())} of {len(norm)} values of p_mask, {label}'s at "
                 f"{int((norm[method] > norm[TRUTH]).sum())}. ")
    if matched.empty:
        return text + (f"The two losses do not overlap (the BERT's L {L[BERT].min():.2e}–{L[BERT].max():.2e}, "
                       f"{label}'s {L[method].min():.2e}–{L[method].max():.2e}), so on this run the norm half of the "
                       "claim cannot be told apart from the MSE half.")
    ratio = matched["norm ratio"]
    side = ("larger" if (ratio > 1).all() else "smaller" if (ratio < 1).all()
            else "sometimes larger, sometimes smaller")
    return text + (f"At matched MSE (the BERT at p_mask {', '.join(f'{p:g}' for p in matched.index)}, where its L "
                   f"lies within {label}'s range over the sweep), the BERT's norm is {side}: "
                   f"{ratio.min():.3f}–{ratio.max():.3f} times {label}'s at the same L.")


def als_findings(sweep: pd.DataFrame) -> str:
    """How far below every other method (the truth aside) the rank-r ALS oracle's L is, and where most."""
    L = sweep.pivot(index="p_mask", columns="method", values="L")
    als = next(method for method in L if "ALS" in method)
    beaten = L.drop(columns=[als, TRUTH]).min(axis=1) / L[als]
    return (f"The ALS oracle's L is {beaten.min():.1f}–{beaten.max():.1f}× below the best other method's, most at "
            f"p_mask {beaten.idxmax():g} and least at {beaten.idxmin():g}.")


def lambda_findings(ours: pd.DataFrame, theirs: pd.DataFrame, draws: pd.DataFrame, lam: float, seed: int,
                    paper_L: float) -> str:
    """The λ table against the paper's: each loss's relative difference across λ, the shape of L over λ,
    where the chapter's draw (``seed``) falls among ``draws`` and their mean against the paper's L."""
    metrics = list(PAPER_ORDER)
    ratio = ours[metrics] / theirs.loc[ours.index, metrics] - 1
    error = (ours[[f"{m} se" for m in metrics]].to_numpy() / ours[metrics]).max()
    best = ours["L"].min()
    within = ours.index[ours["L"] <= best * (1 + error["L"])]
    rank = int((draws["L"] < draws.loc[seed, "L"]).sum()) + 1 if seed in draws.index else None
    spreads = (draws["L"].mean() - paper_L) / draws["L"].std()
    return ("The 7x7 λ table against the paper's: "
            + "; ".join(f"{m} {ratio[m].min():+.0%} to {ratio[m].max():+.0%} (s.e. ±{error[m]:.0%})" for m in metrics)
            + f". Our L is within one s.e. of its best at {', '.join(within)} and {ours['L'].max() / best:.1f}× "
            f"its best at {ours['L'].idxmax()}."
            + (f" The chapter's draw (seed {seed}) has the {'' if rank == 1 else _ordinal(rank) + ' '}lowest L of "
               f"{len(draws)} draws; "
               if rank is not None else " ")
            + f"averaged over them, L at λ = {lam:g} is {draws['L'].mean() / paper_L - 1:+.0%} from the paper's, "
            f"{abs(spreads):.1f} draw-to-draw spreads {'below' if spreads < 0 else 'above'} it.")


def _ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, ...

    >>> [_ordinal(n) for n in (1, 2, 3, 4, 11, 12, 21)]
    ['1st', '2nd', '3rd', '4th', '11th', '12th', '21st']
    """
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


# --- the out-of-distribution panels ------------------------------------------------------------------------

def axis_verdicts(relative: pd.DataFrame, axis: str, trained: int) -> str:
    """One sentence on one Fig. 19 panel (``relative``: L_mask / E[X²], one row per value of ``axis``,
    columns BERT and nuclear norm min): at each value other than the trained one, whether the model
    misses (relative loss ≥ ``MISS``) where nuclear-norm minimisation completes (below ``MISS``), is worse
    than answering 0 (≥ 1), and by how much nuclear-norm minimisation is ahead.

    >>> t = pd.DataFrame({"BERT": [0.3, 0.1, 0.8], NN: [0.2, 0.15, 0.15]}, index=[3, 4, 6])
    >>> for clause in axis_verdicts(t, "rows", 4).split("; "): print(clause)
    By rows (trained: 4): the model misses at 6 (0.80 against nuclear-norm minimisation's 0.15)
    it is behind nuclear-norm minimisation at 3, 6 (worst at 6, 5.3×) and ahead at 4
    worse than answering 0 at none.
    """
    bert, nn = relative[BERT], relative[NN]
    others = [v for v in relative.index if v != trained]
    misses = [v for v in others if bert[v] >= MISS > nn[v]]
    behind, ahead = relative.index[bert > nn], relative.index[bert <= nn]
    listed = lambda values: ", ".join(map(str, values)) or "none"  # noqa: E731
    if misses:
        miss = "; ".join(f"{v} ({bert[v]:.2f} against nuclear-norm minimisation's {nn[v]:.2f})" for v in misses)
        text = f"By {axis} (trained: {trained}): the model misses at {miss}; "
    else:
        text = f"By {axis} (trained: {trained}): no miss (L_mask / E[X²] ≥ {MISS} where nuclear-norm minimisation " \
               f"is below it); "
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
    """The rows panel against the paper's reading of Fig. 19 (the model tracks nuclear-norm minimisation
    except when the number of columns changes): at how many row counts other than the trained one the
    model misses where nuclear-norm minimisation completes (``axis_verdicts``' rule), the worst of them,
    and the verdict, by the book's rule on the one model read (``seed``).

    >>> rows_summary(pd.DataFrame({"BERT": [0.3, 0.1, 0.8], NN: [0.2, 0.15, 0.15]}, index=[3, 4, 6]), 4)[:101]
    'The model misses at 1 of 2 row counts other than the trained one, worst at 6 rows (0.80 against 0.15)'
    """
    bert, nn = relative[BERT], relative[NN]
    others = [v for v in relative.index if v != trained]
    misses = [v for v in others if bert[v] >= MISS > nn[v]]
    claim = f"\"tracks nuclear-norm minimisation\" with the rows, read on this one model: {holds({seed: not misses})}"
    if not misses:
        return (f"The model misses at none of the {len(others)} row counts other than the trained one: the paper's "
                f"{claim}.")
    worst = max(misses, key=lambda v: bert[v] / nn[v])
    return (f"The model misses at {len(misses)} of {len(others)} row counts other than the trained one, worst at "
            f"{worst} rows ({bert[worst]:.2f} against {nn[worst]:.2f}): the paper's {claim}.")
