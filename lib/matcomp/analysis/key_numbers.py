"""The key numbers of each one-model finding, read on one run, with the paper's: what the size ladder
(``matcomp.book.ladder``) sets side by side for the 4×4, 5×5 and 7×7 runs, so a reader tells an unfinished
small model from a real difference. Each finding's numbers on one run are one stored derivation
(``matcomp.runs.derived``) of its pre- and post-shift checkpoints: the default build reads them shipped
instead of analysing three more models a chapter."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import cast

import pandas as pd
import torch

from matcomp.analysis.baselines import NN, REGULARISED, headline_table, stored_sweep
from matcomp.analysis.embeddings import position_embeddings, position_silhouettes
from matcomp.analysis.heads import classify_model, family_counts, separating_mask
from matcomp.analysis.interventions import attention_interventions
from matcomp.analysis.patching import all_layers, last_layer, negation_patching, restored_fraction
from matcomp.analysis.phases import Phases
from matcomp.analysis.positions import permuted_losses
from matcomp.analysis.probing import probe_layers
from matcomp.data import Batch, sample_batch, second_moment
from matcomp.paper import LAMBDA_TABLE, PATCHING, POST_SHIFT, PRE_SHIFT, SUDDEN_DROP
from matcomp.presets import preset
from matcomp.runs.derived import Derivation, load_or_compute
from matcomp.runs.run import Run
from matcomp.seeding import analysis_generator


@dataclass(frozen=True)
class Side:
    """A claim the paper makes in direction only, with no number: the value is at least ``bound``
    (``above``) or at most it, or strictly so (``strict``)."""

    bound: float
    above: bool = True
    strict: bool = False

    def holds(self, value: float) -> bool:
        if pd.isna(value):
            return False
        if self.strict:
            return value > self.bound if self.above else value < self.bound
        return value >= self.bound if self.above else value <= self.bound

    def __str__(self) -> str:
        sign = {(True, True): ">", (True, False): "≥", (False, True): "<", (False, False): "≤"}[self.above, self.strict]
        return f"{sign} {self.bound:g}"


Paper = dict[str, "float | Side"]
Reader = Callable[[Run, Phases, dict], dict[str, float]]


@dataclass(frozen=True)
class KeyNumbers:
    """A finding's key numbers: ``read(run, phases, params)`` gives them on one run (``params``: the
    chapter's parameters it reads, ``parameters``), ``paper`` the paper's (a number, or a ``Side`` where it
    reports a direction only), ``references`` the value each number has without the effect (1 for a
    ratio), for the "direction only" verdict; ``checks`` the numbers that hold by construction in any model,
    which check the method and are never judged as findings."""

    finding: str
    read: Reader = field(repr=False)
    paper: Paper
    references: dict[str, float]
    parameters: tuple[str, ...]
    checks: tuple[str, ...] = ()


def _batch(run: Run, samples: int, seed: int, mask: torch.Tensor | None = None) -> Batch:
    """The chapter's evaluation matrices of the run's task (with one shared ``mask``, if given)."""
    return sample_batch(run.config.data, samples, analysis_generator(seed), mask=mask)


def _ratio(table: pd.DataFrame, row: str, base: str = "no intervention", column: str = "L_obs") -> float:
    return float(table.loc[row, column] / table.loc[base, column])


def _copying(run: Run, phases: Phases, p: dict) -> dict[str, float]:
    batch = _batch(run, p["ablation_samples"], p["eval_seed"])
    table = attention_interventions(run.bert(phases.pre), run.bert(phases.post), batch, "post-shift")
    return {"uniform attention, pre-shift: L_obs ×": _ratio(table, "all heads uniform"),
            "Q, K, V from post-shift: L_obs ×": _ratio(table, "Q, K, V from post-shift")}


def _observed(run: Run, phases: Phases, p: dict) -> dict[str, float]:
    batch, post = _batch(run, p["samples"], p["eval_seed"]), run.bert(phases.post)
    table = attention_interventions(post, run.bert(phases.pre), batch, "pre-shift")
    permuted = permuted_losses(post, batch, seeds=range(p["permutations"]))
    return {"uniform attention, post-shift: L_obs ×": _ratio(table, "all heads uniform"),
            "Q, K, V from pre-shift: L_obs ×": _ratio(table, "Q, K, V from pre-shift"),
            "positions permuted: L_mask / E[X²]":
                float(permuted.loc["L_mask", "mean"] / second_moment(run.config.data))}


def _patching(run: Run, phases: Phases, p: dict) -> dict[str, float]:
    model, m = run.bert(phases.post), run.config.model
    sites = cast(dict[Hashable, torch.Tensor], {**all_layers(m.layers, m.heads), **last_layer(m.layers, m.heads)})
    table = negation_patching(model, _batch(run, p["samples"], p["eval_seed"]), sites)
    restored = restored_fraction(table)
    if restored is None:  # a model answering ~0 at missing entries whatever its input: nothing to restore
        return {"restored, all layers": float("nan"), "restored, last layer": float("nan")}
    return {f"restored, {site}": float(restored[site]) for site in ("all layers", "last layer")}


def _reported(table: dict, row: str, column: int) -> float:
    """A loss the paper reports in one of its tables (column 0: L_obs, 1: L_mask)."""
    value = table[row][column]
    if value is None:
        raise ValueError(f"the paper reports no value for {row!r}, column {column}")
    return value


def _paper_ratio(table: dict, row: str, column: int = 0) -> float:
    """A condition's loss over the unablated model's in one of the paper's tables (column 0: L_obs)."""
    return _reported(table, row, column) / _reported(table, "no intervention", column)


def _paper_restored() -> float:
    """The share of the clean answer the paper's patching restores (App. F): its patched L_mask(X) against
    its clean model's, over the gap to the corrupted run, which answers −X at the missing entries
    (L_mask(X) = 4·E[X²] for an exact completion; the paper does not print it)."""
    clean, corrupted = _reported(POST_SHIFT, "no intervention", 1), 4 * second_moment(preset("paper").data)
    return 1 - (PATCHING["all layers"]["L_mask(X)"] - clean) / (corrupted - clean)


TAXONOMY_FAMILIES = ("row", "column", "masked-row", "longest-contiguous-column")
SEPARATED = ("masked-row", "longest-contiguous-column")  # the families fig5_mask cannot tell apart
THRESHOLDS = ("mass", "enrichment", "identity_enrichment", "mask_ratio")  # classify_heads's, set by the chapter


def _taxonomy(run: Run, phases: Phases, p: dict) -> dict[str, float]:
    """Heads of each family on random masks, and of the two that ``fig5_mask`` confounds on
    ``separating_mask`` (NaN on a task smaller than 5×5, which has none)."""
    thresholds, d, model = {name: p[name] for name in THRESHOLDS}, run.config.data, run.bert(phases.post)
    masks: dict[str, torch.Tensor | None] = {"random": None}  # None: random masks
    if min(d.n_rows, d.n_cols) >= 5:
        masks["separating"] = separating_mask(d.n_rows, d.n_cols)
    counts = family_counts({name: classify_model(model, _batch(run, p["samples"], p["eval_seed"], mask), **thresholds)
                            for name, mask in masks.items()}).astype(float)
    numbers = {f"{family} heads": counts.loc[family, "random"] for family in TAXONOMY_FAMILIES}
    for family in SEPARATED:
        numbers[f"{family} heads, separating mask"] = (counts.loc[family, "separating"] if "separating" in counts
                                                       else float("nan"))
    return numbers


def _embeddings(run: Run, phases: Phases, p: dict) -> dict[str, float]:
    d = run.config.data
    before, after = (position_silhouettes(position_embeddings(run.bert(step), d.n_rows, d.n_cols), d.n_rows, d.n_cols)
                     for step in (phases.pre, phases.post))
    return {"position silhouette by column": after["by column"],
            "by column − by row": after["by column"] - after["by row"],
            "by column: post − pre-shift": after["by column"] - before["by column"]}


def _probing(run: Run, phases: Phases, p: dict) -> dict[str, float]:
    model, d = run.bert(phases.post), run.config.data
    train = sample_batch(d, p["train_matrices"], analysis_generator(0))
    test = sample_batch(d, p["test_matrices"], analysis_generator(1))
    row = probe_layers(model, train, test, "row")["test MSE"].drop(0)
    missing = probe_layers(model, train, test, "element")["test MSE missing"].drop(0)
    return {"masked-row probe: best layer / depth": int(row.idxmin()) / run.config.model.layers,
            "element probe at missing entries: first / last layer MSE": float(missing.iloc[0] / missing.iloc[-1])}


def _nuclear(run: Run, phases: Phases, p: dict) -> dict[str, float]:
    sweep = stored_sweep(run, phases.post, p["p_masks"], p["samples"], p["lam"], p["eval_seed"], p["workers"])["sweep"]
    over_bert = headline_table(sweep, run.config.data.p_mask)["L / BERT's"]
    return {f"L: BERT / {NN}": float(1 / over_bert[NN]),
            "L: regularised / BERT": float(over_bert[REGULARISED.format(p["lam"])])}


BEST_LAMBDA = min(LAMBDA_TABLE, key=lambda lam: LAMBDA_TABLE[lam][2])  # App. B's best λ: the chapter's default
# The paper's masked-row probe is best at layers 3-4 of 12 (Fig. 6). A 4-layer model's layers are a quarter of its
# depth apart, so that position cannot be told from its neighbours; the ladder judges what a 4-layer model can show,
# that the row is best read before the last layer (the probing chapter's 12-layer model reads the position itself).

FINDINGS: dict[str, KeyNumbers] = {k.finding: k for k in (
    KeyNumbers("copying_phase", _copying,
               {"uniform attention, pre-shift: L_obs ×": _paper_ratio(PRE_SHIFT, "all heads uniform"),
                "Q, K, V from post-shift: L_obs ×": _paper_ratio(PRE_SHIFT, "Q, K, V from post-shift")},
               {"Q, K, V from post-shift: L_obs ×": 1.0}, ("ablation_samples", "eval_seed")),
    KeyNumbers("observed_entries", _observed,
               {"uniform attention, post-shift: L_obs ×": _paper_ratio(POST_SHIFT, "all heads uniform"),
                "Q, K, V from pre-shift: L_obs ×": _paper_ratio(POST_SHIFT, "Q, K, V from pre-shift"),
                "positions permuted: L_mask / E[X²]":
                    _reported(POST_SHIFT, "positions permuted", 1) / SUDDEN_DROP["L_mask on the plateau"]},
               {"positions permuted: L_mask / E[X²]": 1.0},  # the L_obs ratios have no direction: any ablation
               ("samples", "eval_seed", "permutations")),   # raises L_obs; the claim is that it stays near the paper's
    KeyNumbers("attention_patching", _patching,
               {"restored, all layers": _paper_restored(), "restored, last layer": _paper_restored()},
               {"restored, all layers": 0.5, "restored, last layer": 0.5}, ("samples", "eval_seed"),
               checks=("restored, all layers",)),  # every site patched: the clean run itself, in any model
    KeyNumbers("head_taxonomy", _taxonomy,
               {**{f"{family} heads": Side(1) for family in TAXONOMY_FAMILIES},
                **{f"{family} heads, separating mask": Side(1) for family in SEPARATED}}, {},
               ("samples", "eval_seed", *THRESHOLDS)),
    KeyNumbers("embeddings", _embeddings,
               {"position silhouette by column": Side(0.1), "by column − by row": Side(0, strict=True),
                "by column: post − pre-shift": Side(0, strict=True)}, {}, ()),
    KeyNumbers("probing", _probing,
               {"masked-row probe: best layer / depth": Side(1, above=False, strict=True),
                "element probe at missing entries: first / last layer MSE": Side(1, strict=True)}, {},
               ("train_matrices", "test_matrices")),
    KeyNumbers("nuclear_norm", _nuclear,
               {f"L: BERT / {NN}": Side(1, above=False, strict=True),
                "L: regularised / BERT": LAMBDA_TABLE[BEST_LAMBDA][2] / SUDDEN_DROP["final L"]},
               {"L: regularised / BERT": 1.0}, ("p_masks", "samples", "lam", "eval_seed", "workers")),
)}


def finding_spec(finding: str) -> KeyNumbers:
    """The ``KeyNumbers`` of ``finding``, a chapter of ``FINDINGS``; any other name is a ValueError."""
    if finding not in FINDINGS:
        raise ValueError(f"finding must be one of {sorted(FINDINGS)}; got {finding!r}")
    return FINDINGS[finding]


def key_numbers_derivation(finding: str, run: Run, phases: Phases, params: dict) -> Derivation:
    """The key numbers of ``finding`` (a chapter of ``FINDINGS``) on ``run``'s pre- and post-shift
    checkpoints with the chapter's parameters ``params`` (those it does not read are ignored), as a
    stored derivation with one table, "numbers" (one row)."""
    spec = finding_spec(finding)
    missing = sorted(set(spec.parameters) - set(params))
    if missing:
        raise ValueError(f"the {finding} key numbers read the chapter's parameters {missing}; they are not given")
    read = {name: params[name] for name in spec.parameters}

    def compute() -> dict[str, pd.DataFrame]:
        numbers = spec.read(run, phases, read)
        return {"numbers": pd.DataFrame([numbers], index=pd.Index([run.path.name], name="run"))}

    key = {name: value for name, value in read.items() if name != "workers"}  # workers change the speed only
    checkpoints = [(run, phases.pre), (run, phases.post)]
    return Derivation(f"key_numbers_{finding}_{run.path.name}", compute, checkpoints, key)


def key_numbers(finding: str, run: Run, phases: Phases, params: dict) -> dict[str, float]:
    """``finding``'s key numbers on ``run`` (shipped, stored, or computed and stored)."""
    return load_or_compute(key_numbers_derivation(finding, run, phases, params))["numbers"].iloc[0].to_dict()
