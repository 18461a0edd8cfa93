"""Training one component at a time (EXPERIMENTS.md §2.10, the paper's Fig. 8).

A component is a group of parameters named by a regular expression on ``MatrixBert`` state-dict
names. ``start_from`` takes a freshly initialised model, copies every *other* parameter from a
trained model's state and freezes it, so only the component (at its BERT initialisation) trains.
The token group carries the embedding LayerNorm with it, as the released ``train_embed.py`` does;
the read-out and the (zero) token-type row stay frozen in every variant.
"""

from __future__ import annotations

import re

import pandas as pd
import torch

from matcomp.config import RunConfig
from matcomp.drop import leave_step, smooth
from matcomp.model import MatrixBert

COMPONENT_PATTERNS = {
    "attention": r"^bert\.encoder\.layer\.\d+\.attention\.",
    "mlp": r"^bert\.encoder\.layer\.\d+\.(intermediate\.dense|output\.(dense|LayerNorm))\.",
    "position": r"^bert\.embeddings\.position_embeddings\.",
    "token": r"^bert\.embeddings\.(word_embeddings|LayerNorm)\.",
}


def component_names(model: MatrixBert, component: str) -> list[str]:
    """The parameter names of ``component`` in ``model``."""
    if component not in COMPONENT_PATTERNS:
        raise ValueError(f"component must be one of {sorted(COMPONENT_PATTERNS)}; got {component!r}")
    regex = re.compile(COMPONENT_PATTERNS[component])
    return [name for name, _ in model.named_parameters() if regex.search(name)]


@torch.no_grad()
def start_from(model: MatrixBert, trained: dict[str, torch.Tensor], component: str) -> MatrixBert:
    """Copy every parameter outside ``component`` from ``trained`` into ``model`` and freeze it;
    the component keeps its fresh values and stays trainable. Returns ``model``."""
    own = set(component_names(model, component))
    missing = [name for name, _ in model.named_parameters() if name not in trained]
    if missing:
        raise ValueError(f"the trained state lacks parameters {missing[:3]}...: is it from a different model shape?")
    for name, param in model.named_parameters():
        if name in own:
            param.requires_grad_(True)
        else:
            if trained[name].shape != param.shape:
                raise ValueError(f"parameter {name} has shape {tuple(trained[name].shape)} in the trained state, "
                                 f"{tuple(param.shape)} in the model")
            param.copy_(trained[name])
            param.requires_grad_(False)
    return model


# The paper's Fig. 8, in words (EXPERIMENTS.md §2.10): its runs go to step 50,000.
PAPER_FIG8 = {"all": "plateau, then the drop", "attention": "plateau, then a drop earlier than normal training",
              "mlp": "no plateau", "position": "the longest plateau: drop just before step 40,000",
              "token": "no plateau"}
CPU_COMPONENT_STEPS = 6000  # on the cpu preset every component has finished its drop by then


def component_steps(cfg: RunConfig) -> int:
    """How long each component trains by default: 6,000 steps on the cpu preset, else the preset's own."""
    return CPU_COMPONENT_STEPS if cfg.name == "cpu" else cfg.train.steps


def component_config(cfg: RunConfig, component: str, init_from: str, steps: int) -> RunConfig:
    """``cfg`` with only ``component`` trained (from its initialisation) and the rest from run ``init_from``;
    the config itself rejects an unknown component, naming ``train.component``."""
    return cfg.override({"train.component": component, "train.init_from": init_from, "train.steps": steps})


def plateau_table(curves: dict[str, pd.DataFrame], level: float, min_plateau: int = 500,
                  near: float = 0.9) -> pd.DataFrame:
    """For each metrics table: whether L_mask sits on the copying plateau ``level`` (smoothed, at least
    ``near`` × ``level``) for ``min_plateau`` steps or more, the step it leaves it, the step it is below
    half of it, and its final smoothed value. Rows: the keys of ``curves``."""
    rows = {}
    for name, metrics in curves.items():
        leaves = leave_step(metrics, level, near)
        half = leave_step(metrics, level, 0.5)
        end = int(metrics["step"].iloc[-1])
        rows[name] = {"plateau": "yes" if (leaves or end) >= min_plateau else "no",
                      "leaves the plateau": leaves, "below half": half,
                      "final L_mask": float(smooth(metrics).dropna().iloc[-1])}
    table = pd.DataFrame.from_dict(rows, orient="index")
    return table.astype({"leaves the plateau": "Int64", "below half": "Int64"})
