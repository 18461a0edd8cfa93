"""The paper's value <-> token-id maps, for both of its models (NeurIPS §2; App. G).

A value x, rounded to 2 decimals, on a grid [-v, v] has id ``zero_id + 100·x`` with
``zero_id = 1 + 100·v``; id 0 is MASK (a missing entry). The BERT's grid is [-10, 10] (ids
1..2001, 2002 ids: ``BERT_TOKENS``); the GPT's is [-2, 2] (ids 1..401, and [SEP] = 404 in a
vocabulary of 405, as in the authors' GPT code: ``GPT_TOKENS``).

>>> tok = Tokenizer()
>>> tok.encode(torch.tensor([0.0, 0.44, -0.24, -10.0, 10.0])).tolist()
[1001, 1045, 977, 1, 2001]
>>> tok.decode(torch.tensor([1045, 977, 0]))
tensor([ 0.4400, -0.2400,  0.0000])
>>> tok.negate(torch.tensor([1045, 0])).tolist()   # id(-x) = 2002 - id(x); MASK stays MASK
[957, 0]
>>> GPT_TOKENS.encode(torch.tensor([0.0, -2.0, 2.0, 0.44])).tolist()
[201, 1, 401, 245]
"""

from __future__ import annotations

import torch

from matcomp import checks

VALUE_MIN, VALUE_MAX = -10.0, 10.0  # the BERT's grid
DECIMALS = 2
STEPS_PER_UNIT = 10 ** DECIMALS  # 100 tokens per unit value
MASK_ID = 0
ROUNDING = 0.5 / STEPS_PER_UNIT  # a value this far beyond the grid still rounds onto its end


class Tokenizer:
    """Encodes real values (or matrices with a mask) on the grid [-``value_max``, ``value_max``]
    into token ids and back; ``sep_id`` and ``vocab_size`` add ids beyond the value ids (the GPT's
    [SEP])."""

    mask_id = MASK_ID

    def __init__(self, value_max: float = VALUE_MAX, sep_id: int | None = None, vocab_size: int | None = None):
        self.value_max = value_max
        self.zero_id = 1 + round(value_max * STEPS_PER_UNIT)  # id of the value 0.0
        self.max_id = 2 * self.zero_id - 1  # id of +value_max
        self.sep_id = sep_id
        self.vocab_size = vocab_size or self.max_id + 1

    def encode(self, values: torch.Tensor, clamp: bool = False) -> torch.Tensor:
        """Ids of ``values`` (any shape) after rounding to 2 decimals; same shape, int64.

        A value outside the grid raises ``ValueError`` unless ``clamp=True`` clips it to the range; a NaN or an
        infinity has no token, clamped or not (a NaN would round to an id of the grid's end).
        """
        values = checks.tensor(values, "Tokenizer.encode: values", "numbers")
        if values.is_floating_point() and not values.isfinite().all():
            where = (~values.isfinite()).nonzero()[0].tolist()
            raise ValueError(f"Tokenizer.encode: values must be finite; got {values[tuple(where)].item()} at index "
                             f"{tuple(where)}: a NaN or an infinity has no token")
        if clamp:
            values = values.clamp(-self.value_max, self.value_max)
        elif values.numel():
            lo, hi = values.min().item(), values.max().item()
            if lo < -self.value_max - ROUNDING or hi > self.value_max + ROUNDING:
                bad = lo if lo < -self.value_max else hi
                raise ValueError(f"value {bad:.4g} is outside the vocabulary's range "
                                 f"[{-self.value_max:g}, {self.value_max:g}]; pass clamp=True to clip it")
        ids = torch.round(values * STEPS_PER_UNIT).long() + self.zero_id
        return ids.clamp(1, self.max_id)  # values within ROUNDING of the ends round onto them

    def encode_masked(self, values: torch.Tensor, observed: torch.Tensor, clamp: bool = False) -> torch.Tensor:
        """Ids of ``values`` with every missing entry (``observed`` False) set to MASK."""
        values = checks.tensor(values, "Tokenizer.encode_masked: values", "numbers")
        observed = checks.tensor(observed, "Tokenizer.encode_masked: observed", "mask")
        checks.fits_shape(observed, "Tokenizer.encode_masked: observed", values.shape, "values")
        return torch.where(observed, self.encode(values, clamp=clamp), MASK_ID)

    def decode(self, ids: torch.Tensor) -> torch.Tensor:
        """Values of ``ids`` (float32); MASK and any id that is not a value ([SEP]) decode to 0, the
        answer that costs E[X²] in the MSE."""
        ids = checks.tensor(ids, "Tokenizer.decode: ids", "ids")
        values = (ids - self.zero_id).float() / STEPS_PER_UNIT
        return torch.where((ids >= 1) & (ids <= self.max_id), values, 0.0)

    def replace_masked(self, ids: torch.Tensor, value: float) -> torch.Tensor:
        """``ids`` with every MASK replaced by the id of ``value`` (the copy check of NeurIPS §3.1)."""
        ids = checks.tensor(ids, "Tokenizer.replace_masked: ids", "ids")
        value = checks.number(value, "Tokenizer.replace_masked: value", -self.value_max, self.value_max)
        return torch.where(ids == MASK_ID, self.encode(torch.tensor(value)), ids)

    def negate(self, ids: torch.Tensor) -> torch.Tensor:
        """Ids of the negated values, MASK kept: the corrupted input of activation patching (App. F)."""
        ids = checks.tensor(ids, "Tokenizer.negate: ids", "ids")
        return torch.where(ids == MASK_ID, MASK_ID, 2 * self.zero_id - ids)


BERT_TOKENS = Tokenizer()
GPT_SEP_ID = 404  # [SEP] in the authors' GPT vocabulary
GPT_TOKENS = Tokenizer(value_max=2.0, sep_id=GPT_SEP_ID, vocab_size=405)
VOCAB_SIZE = BERT_TOKENS.vocab_size
