"""Training one component at a time (EXPERIMENTS.md §2.10, the paper's Fig. 8).

A component is a group of parameters named by a regular expression on ``MatrixBert`` state-dict
names. ``start_from`` takes a freshly initialised model, copies every *other* parameter from a
trained model's state and freezes it, so only the component (at its BERT initialisation) trains.
The token group carries the embedding LayerNorm with it, as the released ``train_embed.py`` does;
the read-out and the (zero) token-type row stay frozen in every variant.
"""

from __future__ import annotations

import re

import torch

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
