"""Which attention implementation a ``transformers`` model runs: the one place that reads or switches
``config._attn_implementation`` (a private field of ``transformers``; the hooks of ``matcomp.models.hooks``
register their own implementation and switch to it here)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeVar

from transformers import AttentionInterface, PretrainedConfig

ConfigT = TypeVar("ConfigT", bound=PretrainedConfig)


def attention_of(config: PretrainedConfig) -> str:
    """The attention implementation ``config`` runs."""
    return config._attn_implementation


def use_attention(config: ConfigT, implementation: str) -> ConfigT:
    """Switch ``config`` to ``implementation`` ("eager", "sdpa" or a function registered with
    ``transformers.AttentionInterface``); returns it. Another name is a ValueError that lists them."""
    known = {"eager", "sdpa"} | set(AttentionInterface._global_mapping)  # registered functions (private API)
    if implementation not in known:
        raise ValueError(f"attention implementation must be 'eager', 'sdpa' or a function registered with "
                         f"transformers.AttentionInterface; got {implementation!r}")
    config._attn_implementation = implementation
    return config


@contextmanager
def attention_implementation(config: PretrainedConfig, implementation: str) -> Iterator[None]:
    """Within the block, ``config`` runs ``implementation`` (e.g. "eager", whose layers return their attention
    probabilities); the one it ran before after it."""
    previous = attention_of(config)
    use_attention(config, implementation)
    try:
        yield
    finally:
        config._attn_implementation = previous
