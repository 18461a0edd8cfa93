"""The paper's model: a Hugging Face ``BertModel`` and a linear read-out on every position
(NeurIPS §2).

Post-LN BERT, learned absolute positions, no dropout, BERT initialisation. The token-type
embedding is zeroed and frozen (the reference code deleted it from the installed library; we
leave the library alone). MASK is id 0, which is also BERT's ``pad_token_id``: its embedding row
starts at zero and never receives a gradient, so a missing entry enters the network as
LayerNorm(position embedding) only.

The attention implementation can be switched on the same weights: ``sdpa`` (fast, to train),
``eager`` (returns attention probabilities) or any function registered with
``transformers.AttentionInterface``; the analyses reach inside attention only through the scoped
hooks of ``matcomp.models.hooks``.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import BertConfig, BertModel

from matcomp.config import ModelConfig
from matcomp.data import Batch
from matcomp.metrics import METRICS, masked_mse
from matcomp.models.attention import attention_of, use_attention
from matcomp.tokenizer import MASK_ID, VOCAB_SIZE

LAYER_NORM_EPS = 1e-12


def bert_config(cfg: ModelConfig, attention: str = "sdpa") -> BertConfig:
    """The ``transformers`` config of the paper's BERT for ``cfg``."""
    config = BertConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=cfg.hidden,
        num_hidden_layers=cfg.layers,
        num_attention_heads=cfg.heads,
        intermediate_size=cfg.intermediate_size,
        hidden_act="gelu",
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        max_position_embeddings=cfg.max_positions,
        type_vocab_size=1,
        layer_norm_eps=LAYER_NORM_EPS,
        pad_token_id=MASK_ID,
    )
    return use_attention(config, attention)


class MatrixBert(nn.Module):
    """BERT encoder + ``Linear(hidden, 1)`` read-out: token ids (B, S) -> predictions (B, S)."""

    metrics = METRICS

    def __init__(self, cfg: ModelConfig, attention: str = "sdpa"):
        super().__init__()
        self.cfg = cfg
        self.bert = BertModel(bert_config(cfg, attention), add_pooling_layer=False)
        self.readout = nn.Linear(cfg.hidden, 1)  # PyTorch default init, as in the reference code
        token_type = self.bert.embeddings.token_type_embeddings.weight
        with torch.no_grad():
            token_type.zero_()
        token_type.requires_grad_(False)

    def forward(self, ids: torch.Tensor, position_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Predictions (B, S); ``position_ids`` (1 or B, S) replaces positions 0..S-1 (NeurIPS §3.2.1)."""
        hidden = self.bert(input_ids=ids, position_ids=position_ids).last_hidden_state  # (B, S, hidden)
        return self.readout(hidden).squeeze(-1)  # (B, S)

    def predict_with_states(self, ids: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        """The predictions (B, S) and the hidden states (the embedding output and the output of every
        layer: L + 1 tensors (B, S, hidden)) from one forward pass: the last state is the read-out's
        input, so a cache of the residual stream costs no second pass."""
        states = self.bert(input_ids=ids, output_hidden_states=True).hidden_states
        return self.readout(states[-1]).squeeze(-1), states

    @property
    def attention(self) -> str:
        return attention_of(self.bert.config)

    def set_attention(self, implementation: str) -> MatrixBert:
        """Switch the attention implementation in place (weights untouched); returns self."""
        use_attention(self.bert.config, implementation)
        return self

    def losses(self, batch: Batch) -> dict[str, torch.Tensor]:
        """``METRICS`` of a batch; ``L`` (the training loss) is attached to the graph."""
        return masked_mse(self(batch.ids), batch.values, batch.observed)

    @torch.no_grad()
    def eval_losses(self, batch: Batch) -> dict[str, torch.Tensor]:
        return self.losses(batch)
