"""The paper's value <-> token-id map (EXPERIMENTS.md §1.3).

Values on the grid [-10, 10] in steps of 0.01 are tokens 1..2001; MASK is id 0; the vocabulary
has 2002 ids. A value x (rounded to 2 decimals) has id ``1001 + 100·x``:

>>> tok = Tokenizer()
>>> tok.encode(torch.tensor([0.0, 0.44, -0.24, -10.0, 10.0])).tolist()
[1001, 1045, 977, 1, 2001]
>>> tok.decode(torch.tensor([1045, 977, 0]))
tensor([ 0.4400, -0.2400,  0.0000])
>>> tok.negate(torch.tensor([1045, 0])).tolist()   # id(-x) = 2002 - id(x); MASK stays MASK
[957, 0]
"""

from __future__ import annotations

import torch

VALUE_MIN, VALUE_MAX = -10.0, 10.0
DECIMALS = 2
STEPS_PER_UNIT = 10 ** DECIMALS  # 100 tokens per unit value
MASK_ID = 0
ZERO_ID = 1001  # id of the value 0.0
VOCAB_SIZE = 2002


class Tokenizer:
    """Encodes real values (or matrices with a mask) into token ids and back."""

    mask_id = MASK_ID
    vocab_size = VOCAB_SIZE

    def encode(self, values: torch.Tensor, clamp: bool = False) -> torch.Tensor:
        """Ids of ``values`` (any shape) after rounding to 2 decimals; same shape, int64.

        A value outside [-10, 10] raises ``ValueError`` unless ``clamp=True`` clips it to the range.
        """
        if clamp:
            values = values.clamp(VALUE_MIN, VALUE_MAX)
        else:
            lo, hi = values.min().item(), values.max().item()
            if lo < VALUE_MIN - 0.005 or hi > VALUE_MAX + 0.005:
                bad = lo if lo < VALUE_MIN else hi
                raise ValueError(f"value {bad:.4g} is outside the vocabulary's range "
                                 f"[{VALUE_MIN}, {VALUE_MAX}]; pass clamp=True to clip it")
        ids = torch.round(values * STEPS_PER_UNIT).long() + ZERO_ID
        return ids.clamp(1, VOCAB_SIZE - 1)  # +-10.004 rounds onto the grid's ends

    def encode_masked(self, values: torch.Tensor, observed: torch.Tensor, clamp: bool = False) -> torch.Tensor:
        """Ids of ``values`` with every missing entry (``observed`` False) set to MASK."""
        return torch.where(observed, self.encode(values, clamp=clamp), MASK_ID)

    def decode(self, ids: torch.Tensor) -> torch.Tensor:
        """Values of ``ids`` (float32); MASK decodes to 0."""
        values = (ids - ZERO_ID).float() / STEPS_PER_UNIT
        return torch.where(ids == MASK_ID, 0.0, values)

    def replace_masked(self, ids: torch.Tensor, value: float) -> torch.Tensor:
        """``ids`` with every MASK replaced by the id of ``value`` (the copy check, §2.2)."""
        return torch.where(ids == MASK_ID, self.encode(torch.tensor(float(value))), ids)

    def negate(self, ids: torch.Tensor) -> torch.Tensor:
        """Ids of the negated values, MASK kept: the corrupted input of activation patching (§2.6)."""
        return torch.where(ids == MASK_ID, MASK_ID, VOCAB_SIZE - ids)
