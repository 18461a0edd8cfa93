"""Numbers the paper reports (4-layer, 8-head model on 7×7 rank-2 matrices unless stated), with
where the paper reports them (NeurIPS: the paper; WS: its workshop version), for the chapters to print
beside ours.

Steps are the paper's: pre-shift = step 4,000, post-shift = step 50,000, drop shortly after 15,000.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

SUDDEN_DROP = {  # NeurIPS §3, Fig. 2; the plateau's L_mask is §3.1.2's, of the pre-shift model at step 4,000
    "L_mask on the plateau": 0.2236,
    "drop step": 15000,
    "final L": 4e-3,
}

# NeurIPS §3.1, Table 1: (step, inputs, m) -> (L'_mask, L_obs)
COPY_TABLE = {
    (1000, "rank-2", "MASK"): (1.4e-3, 9.3e-4), (1000, "rank-2", 0.44): (7.6e-4, 1e-3),
    (1000, "rank-2", -0.24): (6.7e-4, 9.6e-4),
    (1000, "random", "MASK"): (1.5e-3, 8.3e-4), (1000, "random", 0.44): (7.8e-4, 1e-3),
    (1000, "random", -0.24): (6.8e-4, 9.6e-4),
    (4000, "rank-2", "MASK"): (3e-4, 3.3e-4), (4000, "rank-2", 0.44): (4e-4, 2.8e-4),
    (4000, "rank-2", -0.24): (3.7e-4, 2.7e-4),
    (4000, "random", "MASK"): (2.8e-4, 3.5e-4), (4000, "random", 0.44): (3.7e-4, 3e-4),
    (4000, "random", -0.24): (3.6e-4, 2.8e-4),
    (14000, "rank-2", "MASK"): (1.6e-5, 3.4e-5), (14000, "rank-2", 0.44): (1.8e-5, 4.9e-5),
    (14000, "rank-2", -0.24): (5.1e-6, 6.7e-5),
    (14000, "random", "MASK"): (1.1e-5, 3.7e-5), (14000, "random", 0.44): (3.0e-5, 8.5e-5),
    (14000, "random", -0.24): (4.1e-6, 1.1e-4),
}

# NeurIPS §3.1.2 (uniform ablation, model switching): the pre-shift model (step 4,000), 256 samples:
# condition -> (L_obs, L_mask)
PRE_SHIFT = {
    "no intervention": (3.4e-4, 0.2236),
    "all heads uniform": (3.2e-4, 0.2236),
    "Q, K, V from post-shift": (5e-3, 0.2246),
}

# NeurIPS §3.2.1: the post-shift model (step 50,000), 256 samples: condition -> (L_obs, L_mask); None = not reported
POST_SHIFT = {
    "no intervention": (9.2e-5, 0.0128),
    "all heads uniform": (3.7e-3, 0.2183),
    "Q, K, V from pre-shift": (9.5e-4, None),
    "positions permuted": (2.4e-4, 0.5687),
}

# NeurIPS §3.2.2, App. F: patching every head's output of the clean run into the -X run, 256 samples, missing entries
PATCHING = {"all layers": {"L_mask(X)": 0.014, "L_mask(-X)": 0.8066}}

# NeurIPS §3.2.2 (WS §3.2.2): uniform ablation of the heads that fit no family, (3,3), (4,2), (4,5-7), 256 samples
UNINTERPRETABLE_HEADS = ("(3,3)", "(4,2)", "(4,5)", "(4,6)", "(4,7)")  # counted from 1, all in its last two layers
UNINTERPRETABLE_ABLATION = {"without": (9.44e-5, 0.01428), "with": (9.36e-5, 0.01575)}  # (L_obs, L_mask)

# NeurIPS §3.2.2, Figs. 4-5, 22-24: the paper's families (heads counted from 1), from its figures
HEADS_BY_FAMILY = {
    "row": ["(2,1)"], "column": ["(2,2)"], "identity": ["(4,3)"],
    "masked-row": ["(2,1)", "(3,4)", "(4,8)"], "observed-copy": ["(4,3)", "(4,4)"],
    "mask-ignore": ["(2,2)", "(2,3)", "(2,4)", "(2,6)", "(3,2)", "(3,3)", "(3,5)", "(3,1)", "(3,6)"],
    "longest-contiguous-column": ["(2,5)", "(2,7)", "(2,8)"],
    "input-processing": ["(1,1)", "(1,2)", "(1,5)", "(1,6)", "(1,7)", "(1,8)"],
}

# WS App. D (NeurIPS App. B): the regularised problem on 256 matrices at p_mask 0.3, lambda -> (L_obs, L_mask, L)
LAMBDA_TABLE = {
    0.0005: (1.015e-5, 0.040728, 0.012173),
    0.001: (3.686e-5, 0.040456, 0.01211),
    0.0015: (7.959e-5, 0.040505, 0.012155),
    0.002: (0.00013769, 0.040734, 0.012264),
    0.005: (0.00078591, 0.043402, 0.013516),
}


# the steps at which the paper's runs save checkpoints (besides every checkpoint_every): the ones its figures read
PAPER_CHECKPOINT_STEPS = (4000, 10000, 14000, 16000, 20000, 50000)
# NeurIPS Table 1: the value that replaces MASK at the missing entries (None: MASK kept)
COPY_VALUES = (None, 0.44, -0.24)
# NeurIPS Fig. 19 (App. J): the rank sweep reads a model trained on rank 2
RANK_PANEL_RANK = 2

# NeurIPS §3.1: the pre-shift model is the checkpoint at step 4,000; Table 1 reads the plateau at these steps
PRE_SHIFT_STEP = 4000
COPY_TABLE_STEPS = (1000, 4000, 14000)
# those steps as fractions of the paper's drop step: where a run of another drop step reads its own
PHASE_FRACTIONS = tuple(round(s / SUDDEN_DROP["drop step"], 2) for s in (*COPY_TABLE_STEPS, PRE_SHIFT_STEP))


def copy_table() -> pd.DataFrame:
    """The paper's Table 1 in the tidy form of ``matcomp.analysis.evaluation.copy_check`` (plus a step column)."""
    rows = [{"step": step, "inputs": inputs, "m": m if m == "MASK" else f"{m:g}", "L'_mask": lm, "L_obs": lo}
            for (step, inputs, m), (lm, lo) in COPY_TABLE.items()]
    return pd.DataFrame(rows)


# App. J.1, Fig. 18: trained on N(0, 1) factors, the drop again and a final loss of about 5.6e-3
GAUSSIAN_FINAL_LOSS = 5.6e-3

# App. J.2's inference distributions (the authors' configs/ood.yaml): N(0, 0.5²) and Laplace(0, 0.25) factors;
# values clipped to the tokens
OOD_SHIFTS = {"gaussian": {"distribution": "gaussian", "scale": 0.5, "clamp": True},
              "laplace": {"distribution": "laplace", "scale": 0.25, "clamp": True}}

# Fig. 8, in words: the paper's component runs go to step 50,000.
COMPONENT_DYNAMICS = {"all": "plateau, then the drop", "attention": "plateau, then a drop earlier than normal training",
                      "mlp": "no plateau", "position": "the longest plateau: drop just before step 40,000",
                      "token": "no plateau"}

# NeurIPS §3.2.2 "Probing", Fig. 6 and App. K: linear probes on the hidden states of a 12-layer model,
# claim -> what the paper finds (from its curves; it reports no table)
PROBING_MODEL = "12 layers, 7×7 rank 2"
PROBING = {
    "masked row: best layer (lowest test MSE)": "layers 3–4 of 12",
    "masked row: test MSE at that layer / layer 0 (embeddings) / answering 0": "much lower (curves only)",
    "masked row: test |cos| at that layer / median of the others": "much higher (curves only)",
    "element at missing entries: test MSE, first layer / last layer":
        "> 1: deeper layers predict the missing value better",
    "element at missing entries before the drop: first / last layer": "not reported",
    "first singular vector: best test |cos| (answer-0 MSE in brackets)": "inconclusive",
}
PROBING_BEST_LAYERS = (3, 4)  # of 12: where the masked row is most linearly readable

# WS App. B: the 12-layer model reaches a total MSE of order 1e-3 on these (n, rank) tasks, n×n matrices
WS_SIZE_RANK_TASKS = ((7, 2), (10, 3), (12, 3), (15, 4))

# WS §3 ("Interpretable embeddings"), Fig. 8: the position embeddings' norm is nearly constant, except for a drop
# at positions around these, "most of the middle row of the 7×7 input": counted from 0 as the figure's axis (the middle
# row is 21-27; counted from 1 it would be 22-28)
WS_POSITION_NORM_DIP = (21, 26)


def reported(table: dict, row: str, column: int) -> float:
    """A loss the paper reports in one of its tables (column 0: L_obs, 1: L_mask)."""
    value = table[row][column]
    if value is None:
        raise ValueError(f"the paper reports no value for {row!r}, column {column}")
    return value


def reported_ratio(table: dict, row: str, column: int = 0) -> float:
    """A condition's loss over the unablated model's in one of the paper's tables (column 0: L_obs)."""
    return reported(table, row, column) / reported(table, "no intervention", column)


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
