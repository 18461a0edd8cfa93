"""The autoregressive variant of App. G (EXPERIMENTS.md §2.11): a GPT-2 decoder that reads the
masked matrix, a separator, and then writes the full matrix one entry at a time.

Tokens follow the paper's GPT code: a value x in [-2, 2] (rounded to 2 decimals) is id
``201 + 100·x`` (1..401), a missing entry is 0 and [SEP] is 404 (vocabulary 405). A sequence is
``masked X (m·n ids), SEP, full X (m·n ids)``; the model reads all but the last token and is trained
with cross-entropy on every next token, the masked first half included.

Metrics (``GPT_METRICS``): ``L`` the training loss; ``L_full`` the cross-entropy of the second half
only (writing the full matrix); ``acc_obs`` / ``acc_mask`` the token accuracy of the full matrix at
observed / missing entries. During training they are measured with teacher forcing (the true
earlier entries are given); at evaluation (``eval_*`` columns) the accuracies come from greedy
decoding of the whole second half from the prompt ``masked X, SEP``, as in the paper.
"""

from __future__ import annotations

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn
from transformers import GPT2Config, GPT2LMHeadModel

from matcomp.config import ModelConfig
from matcomp.data import Batch
from matcomp.metrics import masked_mse

GPT_VALUE_MAX = 2.0  # the paper's GPT vocabulary covers [-2, 2]
MISSING_ID, SEP_ID, GPT_VOCAB = 0, 404, 405
ZERO_ID = 201  # id of the value 0.0
GPT_METRICS = ("L", "L_full", "acc_obs", "acc_mask")


def gpt_ids(values: torch.Tensor, observed: torch.Tensor | None = None) -> torch.Tensor:
    """Ids of ``values`` (rounded to 2 decimals, inside [-2, 2]); missing entries (``observed``
    False) get id 0.

    >>> gpt_ids(torch.tensor([0.0, -2.0, 2.0, 0.44])).tolist()
    [201, 1, 401, 245]
    """
    worst = values.abs().max().item() if values.numel() else 0.0
    if worst > GPT_VALUE_MAX + 0.005:
        raise ValueError(f"value {worst:.4g} is outside the GPT vocabulary's range [-2, 2]")
    ids = (torch.round(values * 100).long() + ZERO_ID).clamp(1, 2 * ZERO_ID - 1)
    return ids if observed is None else torch.where(observed, ids, MISSING_ID)


def gpt_values(ids: torch.Tensor) -> torch.Tensor:
    """Values of value ids (float32); any other id (MISSING, SEP) decodes to 0, the answer that
    costs E[X²] in the MSE.

    >>> gpt_values(torch.tensor([201, 1, 245, 0, 404])).tolist()
    [0.0, -2.0, 0.4399999976158142, 0.0, 0.0]
    """
    values = (ids - ZERO_ID).float() / 100
    return torch.where((ids >= 1) & (ids < 2 * ZERO_ID), values, 0.0)


def sequences(batch: Batch) -> torch.Tensor:
    """(B, 2·m·n + 1) ids: the masked matrix, [SEP], the full matrix (row-major)."""
    full = gpt_ids(batch.values).flatten(1)
    masked = torch.where(batch.observed.flatten(1), full, MISSING_ID)
    sep = torch.full((len(batch), 1), SEP_ID, dtype=full.dtype, device=full.device)
    return torch.cat([masked, sep, full], dim=1)


def gpt2_config(cfg: ModelConfig, attention: str = "sdpa") -> GPT2Config:
    """minGPT's model as a ``transformers`` GPT-2: pre-LN, learned positions, tanh GELU, no
    dropout, untied read-out without bias, N(0, 0.02) init with residual projections scaled by
    1/√(2·layers)."""
    config = GPT2Config(vocab_size=GPT_VOCAB, n_positions=cfg.max_positions, n_embd=cfg.hidden,
                        n_layer=cfg.layers, n_head=cfg.heads, n_inner=cfg.intermediate_size,
                        activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                        tie_word_embeddings=False, bos_token_id=SEP_ID, eos_token_id=SEP_ID)
    config._attn_implementation = attention
    return config


class MatrixGPT(nn.Module):
    """GPT-2 decoder: token ids (B, T) -> next-token logits (B, T, 405)."""

    metrics = GPT_METRICS

    def __init__(self, cfg: ModelConfig, attention: str = "sdpa"):
        super().__init__()
        self.cfg = cfg
        self.gpt = GPT2LMHeadModel(gpt2_config(cfg, attention))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.gpt(input_ids=ids).logits

    def attentions(self, ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Attention probabilities of every layer, (B, heads, T, T) each (eager attention)."""
        implementation = self.gpt.config._attn_implementation
        self.gpt.config._attn_implementation = "eager"
        try:
            return self.gpt(input_ids=ids, output_attentions=True).attentions
        finally:
            self.gpt.config._attn_implementation = implementation

    def losses(self, batch: Batch) -> dict[str, torch.Tensor]:
        """``GPT_METRICS`` with teacher forcing; ``L`` is attached to the graph."""
        seq = sequences(batch)
        logits = self(seq[:, :-1]).float()
        targets = seq[:, 1:]
        ce = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")  # (B, T - 1)
        half = batch.observed.flatten(1).shape[1]
        right = logits[:, half:].argmax(-1) == targets[:, half:]  # the full matrix's entries
        return {"L": ce.mean(), "L_full": ce[:, half:].mean().detach(), **_accuracies(right, batch)}

    @torch.no_grad()
    def eval_losses(self, batch: Batch) -> dict[str, torch.Tensor]:
        """``GPT_METRICS`` with the accuracies of greedy decoding (the paper's measure)."""
        out = self.losses(batch)
        full = gpt_ids(batch.values).flatten(1)
        return {**out, **_accuracies(self.complete(sequences(batch)[:, :full.shape[1] + 1]) == full, batch)}

    @torch.no_grad()
    def complete(self, prompt: torch.Tensor) -> torch.Tensor:
        """Greedy decoding of the m·n entries after ``prompt`` = (masked X, SEP): ids (B, m·n)."""
        seq = prompt
        for _ in range(prompt.shape[1] - 1):
            seq = torch.cat([seq, self(seq)[:, -1].argmax(-1, keepdim=True)], dim=1)
        return seq[:, prompt.shape[1]:]


def _accuracies(right: torch.Tensor, batch: Batch) -> dict[str, torch.Tensor]:
    observed = batch.observed.flatten(1)
    return {"acc_obs": right[observed].float().mean(), "acc_mask": right[~observed].float().mean()}


@torch.no_grad()
def decoded_losses(model: MatrixGPT, batch: Batch) -> dict[str, float]:
    """The MSEs (``matcomp.metrics.METRICS``) of the greedily decoded matrices, comparable with
    BERT's losses: the GPT's completion read back as values."""
    prompt = sequences(batch)[:, :batch.observed.flatten(1).shape[1] + 1]
    pred = gpt_values(model.complete(prompt)).reshape(batch.values.shape)
    return {k: v.item() for k, v in masked_mse(pred, batch.values, batch.observed).items()}


@torch.no_grad()
def attention_maps(model: MatrixGPT, batch: Batch) -> torch.Tensor:
    """Attention probabilities averaged over the batch: (layers, heads, T, T), T = 2·m·n (the model
    reads all but the last token)."""
    return torch.stack(model.attentions(sequences(batch)[:, :-1])).mean(1)


def attention_scores(maps: torch.Tensor, size: int) -> pd.DataFrame:
    """Where the positions that write the full matrix look, per layer and head (App. G, Fig. 12),
    from ``attention_maps`` of m·n = ``size`` matrices.

    Position t = S + k (S = m·n; SEP for k = 0) predicts entry k of the full matrix. ``to_sep`` is
    its attention to [SEP] (index S), ``to_last_input`` to the last masked-input entry just before
    it (index S - 1), ``to_entry`` to the same entry of the masked input (index k = t - S: the offset
    identity that copies), ``to_written`` to the full-matrix entries already written (indices > S),
    each averaged over k."""
    k = torch.arange(size)
    writers = maps[:, :, size:]  # (layers, heads, S, T): the rows of positions S..2S-1
    table = pd.DataFrame({
        "to_sep": writers[..., size].mean(-1).flatten(),
        "to_last_input": writers[..., size - 1].mean(-1).flatten(),
        "to_entry": writers[:, :, k, k].mean(-1).flatten(),
        "to_written": writers[..., size + 1:].sum(-1).mean(-1).flatten(),
    })
    layers, heads = maps.shape[:2]
    table.index = pd.MultiIndex.from_product([range(1, layers + 1), range(1, heads + 1)], names=["layer", "head"])
    return table


def copy_onset(metrics: pd.DataFrame, level: float = 0.5) -> int | None:
    """The first evaluated step where greedy accuracy at observed entries reaches ``level`` (None if never)."""
    evals = metrics.dropna(subset=["eval_acc_obs"])
    reached = evals[evals.eval_acc_obs >= level]
    return int(reached.step.iloc[0]) if len(reached) else None
