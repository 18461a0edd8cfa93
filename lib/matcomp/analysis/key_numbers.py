"""The key numbers of each one-model finding, read on one run: what the size ladder (``matcomp.book.judging.ladder``)
sets side by side for the 4×4, 5×5 and 7×7 runs and the paper-scale run, so a reader tells an unfinished small
model from a real difference. A reader takes a run, its phases and, as keywords, the chapter's parameters it
reads (its signature names them: ``reader_parameters``) and returns each number by its id (a Python name: the
chapter's ``KeyNumber`` declaration gives its label, for display only, and the paper's claim on it) as an
``Estimate``; each finding's numbers on one run are one stored derivation (``matcomp.runs.derived``) of its pre-
and post-shift checkpoints, which the default build reads shipped instead of analysing three more models a
chapter."""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Hashable
from dataclasses import replace
from typing import NamedTuple, cast

import numpy as np
import pandas as pd
import torch

from matcomp import checks
from matcomp.analysis.baselines import BERT, NN, REGULARISED, headline_table, sweep_derivation
from matcomp.analysis.embeddings import (
    arrangement_correlation,
    cluster_score,
    middle_row_z,
    position_embeddings,
    position_groups,
    task_values,
    value_embeddings,
)
from matcomp.analysis.evaluation import copy_check, predict
from matcomp.analysis.heads import (
    NO_FAMILY,
    cached_scores,
    classify_heads,
    classify_model,
    family_counts,
    heads_by_family,
    resampled_counts,
    score_baselines,
    separating_mask,
)
from matcomp.analysis.interventions import ablate_heads, intervention_predictions, interventions_table
from matcomp.analysis.patching import all_layers, last_layer, negation_patching, restored_fraction
from matcomp.analysis.phases import Phases
from matcomp.analysis.positions import permuted_losses
from matcomp.analysis.probing import fit_probe, layer_features, probe_layers, probe_targets
from matcomp.data import Batch, matrix_count, sample_batch, second_moment
from matcomp.drop import leave_step
from matcomp.metrics import loss_ratio
from matcomp.models.bert import MatrixBert
from matcomp.models.hooks import attention_hooks, explicit_attention, run_with_cache
from matcomp.runs.derived import Derivation, load_or_compute
from matcomp.runs.run import Run
from matcomp.seeding import ANALYSIS_OFFSET, analysis_generator

NOISE_SE = 2.0  # standard errors within which an estimate cannot be told from no effect (the verdicts' rule too)
TAXONOMY_FAMILIES = ("row", "column", "masked-row", "longest-contiguous-column")
SEPARATED = ("masked-row", "longest-contiguous-column")  # the families fig5_mask cannot tell apart
RESAMPLES = 200  # bootstrap resamples of the evaluation matrices behind a head count's standard error


def resample_generator(seed: int) -> torch.Generator:
    """The CPU generator of the bootstrap resamples of the matrices ``analysis_generator(seed)`` drew: stream
    2·10⁶ + ``seed``, as ``matcomp.seeding`` lists it, apart from the stream that drew them (it is the stream of
    ``analysis_generator(10⁶ + seed)``, which no chapter's evaluation seed reaches)."""
    return analysis_generator(ANALYSIS_OFFSET + checks.seed(seed, "eval_seed", ANALYSIS_OFFSET), "eval_seed")


class Estimate(NamedTuple):
    """One key number on one run: its value and, where it is estimated from sampled matrices, its standard error
    (NaN where none is known)."""

    value: float
    se: float = float("nan")


Reader = Callable[..., dict[str, Estimate]]  # (run, phases, **the chapter's parameters it reads) -> id -> estimate


def heads_id(family: str, mask: str = "random") -> str:
    """The id of the key number counting ``family``'s heads on ``mask``'s matrices (``read_taxonomy``), built in
    one place for the reader and the chapter's declaration.

    >>> heads_id("row"), heads_id("longest-contiguous-column", "separating")
    ('row_heads', 'longest_contiguous_column_heads_separating')
    """
    return f"{family.replace('-', '_')}_heads" + ("" if mask == "random" else f"_{mask}")


def _batch(run: Run, samples: int, seed: int, mask: torch.Tensor | None = None, name: str = "samples") -> Batch:
    """The chapter's evaluation matrices of the run's task (with one shared ``mask``, if given): ``samples``
    of them from ``seed``, which a bad value of is refused by its parameter's name (``name``, ``eval_seed``)."""
    samples = matrix_count(run.config.data, samples, name)
    return sample_batch(run.config.data, samples, analysis_generator(seed, "eval_seed"), mask=mask)


def _ratios(predictions: dict[str, torch.Tensor], batch: Batch,
            numbers: dict[str, tuple[str, str]]) -> dict[str, Estimate]:
    """Each key number (id -> condition and loss, "L_obs" or "L_mask") as the condition's loss over the
    unablated model's on the same matrices, with its standard error (``loss_ratio``)."""
    out = {}
    for key, (condition, loss) in numbers.items():
        where = batch.observed if loss == "L_obs" else ~batch.observed
        out[key] = Estimate(*loss_ratio(predictions[condition], predictions["no intervention"], batch.values, where))
    return out


def read_drop(run: Run, phases: Phases | None = None) -> dict[str, Estimate]:
    """The sudden drop's numbers, from the run's metrics alone (NeurIPS §3, Fig. 2): its plateau over the copying
    level E[X²], its drop step, how sharp the drop is (its fall from ``ON_PLATEAU`` of the plateau to half of it,
    in steps, over the steps it sat on the plateau: the components page's rule of a sudden fall) and how far
    below its plateau it ends; the drop step and sharpness NaN where it has no drop."""
    drop, nan = run.drop, float("nan")
    leaves = leave_step(run.metrics, drop.plateau) if drop.half_step is not None else None
    return {"plateau_share": Estimate(drop.plateau / second_moment(run.config.data)),
            "drop_step": Estimate(nan if drop.half_step is None else float(drop.half_step)),
            "fall_over_plateau": Estimate(nan if drop.half_step is None or not leaves
                                          else (drop.half_step - leaves) / leaves),
            "depth": Estimate(drop.factor)}


def read_copying(run: Run, phases: Phases, *, copy_samples: int, ablation_samples: int,
                 eval_seed: int) -> dict[str, Estimate]:
    """How well the pre-shift model copies (Table 1: the worst of L'_mask and L_obs over its cells, on rank-r and
    on random full-rank inputs, over E[X²]: 0 copies exactly, 1 is no better than answering 0), and its losses
    under uniform attention and under the post-shift model's Q, K, V, over its own (NeurIPS §3.1)."""
    pre = run.bert(phases.pre)
    table = copy_check(pre, run.config.data, matrix_count(run.config.data, copy_samples, "copy_samples"), eval_seed)
    worst = table.set_index("inputs")[["L'_mask", "L_obs"]].max(axis=1).groupby(level=0).max()
    copying = second_moment(run.config.data)
    batch = _batch(run, ablation_samples, eval_seed, name="ablation_samples")
    predictions = intervention_predictions(pre, run.bert(phases.post), batch, "post-shift")
    return {"copy_error_low_rank": Estimate(float(worst[f"rank-{run.config.data.rank}"] / copying)),
            "copy_error_random": Estimate(float(worst["random"] / copying)),
            **_ratios(predictions, batch, {"uniform_pre_obs": ("all heads uniform", "L_obs"),
                                           "uniform_pre_mask": ("all heads uniform", "L_mask"),
                                           "qkv_post_mask": ("Q, K, V from post-shift", "L_mask")})}


def read_observed(run: Run, phases: Phases, *, samples: int, eval_seed: int,
                  permutations: int) -> dict[str, Estimate]:
    """The post-shift model's losses under uniform attention, the pre-shift Q, K, V and permuted positions
    (NeurIPS §3.2.1), as ratios to its own (a permutation's: the mean over ``permutations``) or, for uniform
    attention's L_mask, as a share of the plateau's E[X²]."""
    permutations = checks.count(permutations, "permutations")
    batch, post = _batch(run, samples, eval_seed), run.bert(phases.post)
    predictions = intervention_predictions(post, run.bert(phases.pre), batch, "pre-shift")
    permuted = permuted_losses(post, batch, seeds=range(permutations))
    table = interventions_table(predictions, batch)
    copying = second_moment(run.config.data)
    return {**_ratios(predictions, batch, {"uniform_post_obs": ("all heads uniform", "L_obs"),
                                           "qkv_pre_obs": ("Q, K, V from pre-shift", "L_obs")}),
            "uniform_post_mask_share": Estimate(float(table.loc["all heads uniform", "L_mask"] / copying)),
            "permuted_obs": Estimate(float(permuted.loc["L_obs", "mean"] / table.loc["no intervention", "L_obs"])),
            "permuted_mask": Estimate(float(permuted.loc["L_mask", "mean"] / table.loc["no intervention", "L_mask"]))}


def read_patching(run: Run, phases: Phases, *, samples: int, eval_seed: int) -> dict[str, Estimate]:
    """The share of the clean answer that patching every head's output restores, in all layers and in the last
    (NeurIPS §3.2.2, App. F), and the last layer's patched L_mask(X) over the clean model's."""
    model, m = run.bert(phases.post), run.config.model
    sites = cast(dict[Hashable, torch.Tensor], {**all_layers(m.layers, m.heads), **last_layer(m.layers, m.heads)})
    table = negation_patching(model, _batch(run, samples, eval_seed), sites)
    restored, missing = restored_fraction(table), table["L_mask(X)"]
    over_clean = {"patched_last_over_clean": Estimate(float(missing["last layer"] / missing["clean"]))}
    patched = {"restored_all": "all layers", "restored_last": "last layer"}
    if restored is None:  # a model answering ~0 at missing entries whatever its input: nothing to restore
        return {**dict.fromkeys(patched, Estimate(float("nan"))), **over_clean}
    return {**{key: Estimate(float(restored[site])) for key, site in patched.items()}, **over_clean}


def read_taxonomy(run: Run, phases: Phases, *, samples: int, eval_seed: int, mass: float, enrichment: float,
                  identity_enrichment: float, mask_ratio: float, near: float) -> dict[str, Estimate]:
    """Heads of each family on random masks (``classify_heads`` with the chapter's thresholds), the share of the
    identity heads in the last layer, the heads of the two families that ``fig5_mask`` confounds on
    ``separating_mask`` (NaN on a task smaller than 5×5, which has none), and the pre-shift model's heads of any
    family, on the same random masks."""
    thresholds = {"mass": mass, "enrichment": enrichment, "identity_enrichment": identity_enrichment,
                  "mask_ratio": mask_ratio, "near": near}
    d, model = run.config.data, run.bert(phases.post)
    masks: dict[str, torch.Tensor | None] = {"random": None}  # None: random masks
    if min(d.n_rows, d.n_cols) >= 5:
        masks["separating"] = separating_mask(d.n_rows, d.n_cols)
    batches = {name: _batch(run, samples, eval_seed, mask) for name, mask in masks.items()}
    classified = {name: _classified(model, batch, thresholds, eval_seed) for name, batch in batches.items()}
    tables = {name: table for name, (table, _) in classified.items()}
    counts = family_counts(tables).astype(float)
    spread = {name: draws.std(ddof=1) for name, (_, draws) in classified.items()}
    numbers = {heads_id(family): Estimate(counts.loc[family, "random"], spread["random"][family])
               for family in TAXONOMY_FAMILIES}
    identity = [layer for (layer, _), held in tables["random"].families.items() if "identity" in held]
    last = run.config.model.layers - 1  # layers counted from 0
    numbers["identity_last_layer_share"] = Estimate(sum(layer == last for layer in identity) / len(identity)
                                                    if identity else float("nan"))
    for family in SEPARATED:
        numbers[heads_id(family, "separating")] = (Estimate(counts.loc[family, "separating"],
                                                            spread["separating"][family])
                                                   if "separating" in counts else Estimate(float("nan")))
    numbers["least_group_ablation"] = _least_group_ablation(model, batches["random"], tables["random"])
    before = classify_model(run.bert(phases.pre), batches["random"], **thresholds)
    numbers["pre_shift_family_heads"] = Estimate(float(before.families.map(bool).sum()))
    return numbers


def _classified(model: MatrixBert, batch: Batch, thresholds: dict, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``classify_model`` of ``model`` on ``batch``, and the family counts of ``RESAMPLES`` bootstrap resamples of
    its matrices (``resampled_counts``, drawn from ``resample_generator(seed)``), from one forward pass."""
    _, cache = run_with_cache(model, batch.ids, ["probs"])
    table = classify_heads(cached_scores(cache, batch.observed), score_baselines(batch.observed), **thresholds)
    return table, resampled_counts(cache, batch.observed, RESAMPLES, resample_generator(seed), **thresholds)


def _least_group_ablation(model: MatrixBert, batch: Batch, table: pd.DataFrame) -> Estimate:
    """NeurIPS App. L: the heads of each family of ``table`` (``heads_by_family``; not those of no family, which
    mix what the paper keeps apart: its input-processing group, which App. L ablates, and its uninterpretable heads,
    which §3.2.2 calls of no significant effect) ablated uniformly together, one family at a time, on
    ``batch``; the smallest rise of L_mask over the unablated model's, with its paired standard error
    (``loss_ratio``): the family that moves the output least. NaN where no head has a family."""
    with attention_hooks(model, explicit_attention(model)):  # the ablations' own attention path, so 1 is no change
        base = predict(model, batch.ids)
    rises = []
    for family, heads in heads_by_family(table).items():
        if family != NO_FAMILY:
            with ablate_heads(model, heads):
                rises.append(Estimate(*loss_ratio(predict(model, batch.ids), base, batch.values, ~batch.observed)))
    return min(rises, key=lambda rise: rise.value, default=Estimate(float("nan")))


def jackknife(statistic: Callable[[np.ndarray], float], n: int) -> Estimate:
    """``statistic`` of the items 0..n−1 (called with the indices it reads), with its jackknife standard error:
    the spread of its n leave-one-out values, sqrt((n − 1)/n · Σ(θ₍ᵢ₎ − θ̄)²). A number computed from the model's
    own weights (the positions' silhouettes) has no sampled matrices; what it rests on is its n positions.

    >>> values = np.array([1.0, 2.0, 3.0, 4.0])
    >>> [round(x, 4) for x in jackknife(lambda i: float(values[i].mean()), 4)]  # the mean's usual s.e.
    [2.5, 0.6455]
    """
    leave_one_out = np.array([statistic(np.delete(np.arange(n), i)) for i in range(n)])
    spread = math.sqrt((n - 1) / n * ((leave_one_out - leave_one_out.mean()) ** 2).sum())
    return Estimate(statistic(np.arange(n)), spread)


def _silhouettes(points: torch.Tensor, n_rows: int, n_cols: int) -> dict[str, Estimate]:
    """The positions' silhouette by column, and by column less by row, each with its jackknife standard error
    over the positions (``jackknife``); each subset of positions is scored once for both."""
    rows, cols = position_groups(n_rows, n_cols)

    @functools.cache
    def scores(kept: tuple[int, ...]) -> tuple[float, float]:
        """The silhouettes of the ``kept`` positions by column and by row."""
        chosen = np.array(kept)
        return cluster_score(points[chosen], cols[chosen]), cluster_score(points[chosen], rows[chosen])

    def column(kept: np.ndarray) -> float:
        return scores(tuple(kept))[0]

    def column_minus_row(kept: np.ndarray) -> float:
        by_column, by_row = scores(tuple(kept))
        return by_column - by_row

    return {"by column": jackknife(column, len(cols)), "by column − by row": jackknife(column_minus_row, len(cols))}


def read_embeddings(run: Run, phases: Phases, *, value_samples: int) -> dict[str, Estimate]:
    """How the position embeddings cluster by column before and after the drop, with standard errors over the
    positions, and the middle row's norm dip (NeurIPS §3.3, Fig. 7; WS Fig. 8); and how closely the value tokens
    (every one the task uses, found from ``value_samples`` matrices) lie in their final arrangement at the copy
    table's last step, the paper's 14,000 of its drop at 15,000 (Fig. 9), with its standard error over the tokens: on
    a run that ships no checkpoint of the plateau after its pre-shift one (the paper's model: 4,000), at that one; on
    a run without a drop, its last checkpoint against itself (1, read by no ladder)."""
    d = run.config.data
    before, after = (_silhouettes(position_embeddings(run.bert(step), d.n_rows, d.n_cols), d.n_rows, d.n_cols)
                     for step in (phases.pre, phases.post))
    values = task_values(d, matrix_count(d, value_samples, "value_samples"))
    final, earlier = (value_embeddings(run.bert(step), values) for step in (phases.post, phases.copy_steps[-1]))
    aligned = jackknife(lambda kept: arrangement_correlation(final[kept], earlier[kept]), len(values))
    return {"column_silhouette": after["by column"], "column_minus_row": after["by column − by row"],
            "column_silhouette_pre": before["by column"], "middle_row_z": Estimate(middle_row_z(run, phases.post)),
            "tokens_arranged_before_drop": aligned}


def read_probing(run: Run, phases: Phases, *, train_matrices: int, test_matrices: int) -> dict[str, Estimate]:
    """How well linear probes of each layer read the masked row and the missing entries (NeurIPS §3.3, Fig. 6):
    the best layer's masked-row probe over answering 0, with its standard error over the test matrices, paired."""
    d = run.config.data
    train_matrices, test_matrices = matrix_count(d, train_matrices, "train_matrices"), matrix_count(d, test_matrices,
                                                                                                  "test_matrices")
    model = run.bert(phases.post)
    train = sample_batch(d, train_matrices, analysis_generator(0))
    test = sample_batch(d, test_matrices, analysis_generator(1))
    best = int(probe_layers(model, train, test, "row")["test MSE"].drop(0).idxmin())
    missing = probe_layers(model, train, test, "element")["test MSE missing"].drop(0)
    weights = fit_probe(layer_features(model, train)[best], probe_targets(train, "row"))
    guess = (layer_features(model, test)[best].double() @ weights).reshape(test_matrices, -1)  # a matrix a row
    truth = probe_targets(test, "row").double().reshape(test_matrices, -1)
    everywhere = torch.ones_like(truth, dtype=torch.bool)
    return {"row_probe_ratio": Estimate(*loss_ratio(guess, torch.zeros_like(truth), truth, everywhere)),
            "element_layers_lowering": Estimate(float((missing.diff().dropna() < 0).mean())),
            "element_first_over_last": Estimate(float(missing.iloc[0] / missing.iloc[-1]))}


def sweep_derivation_by_run(run: Run, step: int, p_masks, samples: int, lam: float, seed: int = 0,
                         workers: int = 1) -> Derivation:
    """``sweep_derivation`` named by its run (``completion_sweep_<run>``): each run read up the ladder has a sweep
    of its own, and a shipped one (the paper's model's, which the nuclear-norm chapter draws) is the very table its
    key numbers read, never one that replaces another among the shipped tables (those of one name share a stem)."""
    sweep = sweep_derivation(run, step, p_masks, samples, lam, seed, workers)
    return replace(sweep, name=f"{sweep.name}_{run.path.name}")


def read_nuclear(run: Run, phases: Phases, *, p_masks: list[float], samples: int, lam: float, eval_seed: int,
                 workers: int) -> dict[str, Estimate]:
    """BERT's L over nuclear-norm minimisation's, whose standard error is that of their paired difference
    over L_NN (L_BERT / L_NN = 1 − (L_NN − L_BERT) / L_NN), the share of masking rates where BERT's is the lower
    beyond the noise, and the regularised problem's L over BERT's, its standard error that of their paired
    difference over L_BERT."""
    derivation = sweep_derivation_by_run(run, phases.post, p_masks, samples, lam, eval_seed, workers)
    sweep = load_or_compute(derivation)["sweep"]
    headline = headline_table(sweep, run.config.data.p_mask)
    over_bert = headline["L / BERT's"]
    rates = sweep[sweep["method"] == NN].set_index("p_mask")
    bert = sweep[sweep["method"] == BERT].set_index("p_mask")["L"]
    se = rates["± s.e. of L − L_BERT"]
    beaten = (rates["L"] - bert) > NOISE_SE * se  # beyond the noise at each masking rate (NaN s.e.: no share)
    return {"bert_over_nn": Estimate(float(1 / over_bert[NN]),
                                     float(headline.loc[NN, "± s.e. of L − L_BERT"] / headline.loc[NN, "L"])),
            "rates_beaten_share": Estimate(float(beaten.mean()) if se.notna().all() else float("nan")),
            "regularised_over_bert": Estimate(float(over_bert[REGULARISED.format(lam)]),
                                              float(headline.loc[REGULARISED.format(lam), "± s.e. of L − L_BERT"]
                                                    / headline.loc[BERT, "L"]))}


def reader_parameters(read: Reader) -> tuple[str, ...]:
    """The chapter parameters ``read`` takes: its keyword-only arguments, which name them."""
    return tuple(name for name, p in inspect.signature(read).parameters.items() if p.kind is p.KEYWORD_ONLY)


def key_numbers_derivation(finding: str, read: Reader, run: Run, phases: Phases, params: dict) -> Derivation:
    """The key numbers of ``finding`` (a chapter) read by ``read`` on ``run``'s pre-shift, copy-table and post-shift
    checkpoints with the chapter's parameters ``params`` (those ``read`` does not take are ignored), as a stored
    derivation with one table, "numbers" (one row an id: its value and standard error)."""
    names = reader_parameters(read)
    missing = sorted(set(names) - set(params))
    if missing:
        raise ValueError(f"the {finding} key numbers read the chapter's parameters {missing}; they are not given")
    given = {name: params[name] for name in names}

    def compute() -> dict[str, pd.DataFrame]:
        numbers = read(run, phases, **given)
        table = pd.DataFrame.from_dict(numbers, orient="index", columns=list(Estimate._fields), dtype=float)
        return {"numbers": table.rename_axis("key number")}

    key = {name: value for name, value in given.items() if name != "workers"}  # workers change the speed only
    checkpoints = [(run, step) for step in sorted({phases.pre, *phases.copy_steps, phases.post})]
    return Derivation(f"key_numbers_{finding}_{run.path.name}", compute, checkpoints, key)


def key_numbers(finding: str, read: Reader, run: Run, phases: Phases, params: dict) -> dict[str, Estimate]:
    """``finding``'s key numbers on ``run`` (shipped, stored, or computed and stored), id -> estimate."""
    table = load_or_compute(key_numbers_derivation(finding, read, run, phases, params))["numbers"]
    return {key: Estimate(float(row.value), float(row.se)) for key, row in table.iterrows()}
