"""The autoregressive variant of App. G: a GPT-2 decoder that reads the
masked matrix, a separator, and then writes the full matrix one entry at a time.

Tokens follow the paper's GPT code (``matcomp.tokenizer.GPT_TOKENS``): a value x in [-2, 2] is id
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

import torch
import torch.nn.functional as F
from torch import nn
from transformers import GPT2Config, GPT2LMHeadModel

from matcomp.config import ModelConfig
from matcomp.data import Batch
from matcomp.models.attention import attention_implementation, use_attention
from matcomp.tokenizer import GPT_SEP_ID, GPT_TOKENS, MASK_ID

GPT_METRICS = ("L", "L_full", "acc_obs", "acc_mask")


def sequences(batch: Batch) -> torch.Tensor:
    """(B, 2·m·n + 1) ids: the masked matrix, [SEP], the full matrix (row-major)."""
    full = GPT_TOKENS.encode(batch.values).flatten(1)
    masked = torch.where(batch.observed.flatten(1), full, MASK_ID)
    sep = torch.full((len(batch), 1), GPT_SEP_ID, dtype=full.dtype, device=full.device)
    return torch.cat([masked, sep, full], dim=1)


def gpt2_config(cfg: ModelConfig, attention: str = "sdpa") -> GPT2Config:
    """minGPT's model as a ``transformers`` GPT-2: pre-LN, learned positions, tanh GELU, no
    dropout, untied read-out without bias, N(0, 0.02) init with residual projections scaled by
    1/√(2·layers)."""
    config = GPT2Config(vocab_size=GPT_TOKENS.vocab_size, n_positions=cfg.max_positions, n_embd=cfg.hidden,
                        n_layer=cfg.layers, n_head=cfg.heads, n_inner=cfg.intermediate_size,
                        activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                        tie_word_embeddings=False, bos_token_id=GPT_SEP_ID,
                        eos_token_id=GPT_SEP_ID)
    return use_attention(config, attention)


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
        with attention_implementation(self.gpt.config, "eager"):
            return self.gpt(input_ids=ids, output_attentions=True).attentions

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
        full = GPT_TOKENS.encode(batch.values).flatten(1)
        return {**out, **_accuracies(self.decode(sequences(batch)[:, :full.shape[1] + 1])[0] == full, batch)}

    @torch.no_grad()
    def decode(self, prompt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Greedy decoding of the m·n entries after ``prompt`` = (masked X, SEP), as the paper decodes:
        the ids (B, m·n) of the argmax tokens, and at each position the mean value of the model's
        distribution over value tokens there (B, m·n), given the greedy entries before it.

        A model trained with cross-entropy predicts a distribution; its argmax is a mode, its mean the
        number an MSE rewards, so the two read the same model differently (``matcomp.analysis.gpt``)."""
        values_ids = torch.arange(1, GPT_TOKENS.max_id + 1, device=prompt.device)  # the value tokens
        values = GPT_TOKENS.decode(values_ids)
        seq, means = prompt, []
        for _ in range(prompt.shape[1] - 1):
            logits = self(seq)[:, -1]
            means.append(torch.softmax(logits[:, values_ids].float(), dim=-1) @ values)
            seq = torch.cat([seq, logits.argmax(-1, keepdim=True)], dim=1)
        return seq[:, prompt.shape[1]:], torch.stack(means, dim=1)


def _accuracies(right: torch.Tensor, batch: Batch) -> dict[str, torch.Tensor]:
    observed = batch.observed.flatten(1)
    return {"acc_obs": right[observed].float().mean(), "acc_mask": right[~observed].float().mean()}
