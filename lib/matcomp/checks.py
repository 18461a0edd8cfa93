"""The checks the library's public functions make of what they are given, in one place, beneath every other
module: a count, seed, number, table or tensor that cannot be used stops at once with one line naming the
argument (``ValueError``, or ``TypeError`` for a wrong type) instead of a traceback from deep inside the work or
a silently wrong result.

What an allocation may take is ``matcomp.limits``' (``fits_memory``).

>>> count(3, "samples"), seed(7, "eval_seed"), number(0.5, "near", low=0, high=1, open_low=True)
(3, 7, 0.5)
"""

from __future__ import annotations

import math
import operator

import pandas as pd
import torch

MAX_GENERATOR_SEED = 2 ** 63 - 1  # a torch.Generator's seed, read as a signed 64-bit integer (as config's MAX_SEED)


def _range(low: float | None, high: float | None, open_low: bool = False, open_high: bool = False) -> str:
    if low is not None and high is not None:
        return f" in {'(' if open_low else '['}{low:,}, {high:,}{')' if open_high else ']'}"
    if low is not None:
        return f" {'>' if open_low else '>='} {low:,}"
    return f" {'<' if open_high else '<='} {high:,}" if high is not None else ""


def integer(value, name: str, low: int | None = None, high: int | None = None) -> int:
    """``value`` as an int in [``low``, ``high``] (a bool, float or string is not one)."""
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{name} must be an integer{_range(low, high)}; got {value!r} ({type(value).__name__})")
    value = operator.index(value)
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(f"{name} must be an integer{_range(low, high)}; got {value!r}")
    return value


def count(value, name: str) -> int:
    """``value`` as an int >= 1: how many matrices, steps, seeds or workers."""
    return integer(value, name, low=1)


def seed(value, name: str, offset: int = 0) -> int:
    """``value`` as a seed >= 0 whose generator seed, ``offset`` + ``value``, a ``torch.Generator`` takes."""
    return integer(value, name, low=0, high=MAX_GENERATOR_SEED - offset)


def number(value, name: str, low: float | None = None, high: float | None = None, open_low: bool = False,
           open_high: bool = False) -> float:
    """``value`` as a finite float in [``low``, ``high``] (an end excluded with ``open_low``, ``open_high``)."""
    allowed = f"a finite number{_range(low, high, open_low, open_high)}"
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(type(value), "__float__"):
        raise TypeError(f"{name} must be {allowed}; got {value!r} ({type(value).__name__})")
    value = float(value)
    if (not math.isfinite(value) or (low is not None and (value < low or open_low and value == low))
            or (high is not None and (value > high or open_high and value == high))):
        raise ValueError(f"{name} must be {allowed}; got {value!r}")
    return value


TENSOR_KINDS = {  # what a tensor argument holds -> (the test of its dtype, the words for it)
    "numbers": (lambda t: t.dtype != torch.bool and not t.is_complex(), "of real numbers"),
    "ids": (lambda t: t.dtype != torch.bool and not t.is_floating_point() and not t.is_complex(), "of integer ids"),
    "mask": (lambda t: t.dtype == torch.bool, "of bools"),
}


def tensor(value, name: str, kind: str | None = None, shape: tuple[int, ...] | None = None) -> torch.Tensor:
    """``value``, a tensor holding ``kind`` (``TENSOR_KINDS``) of shape ``shape``, where given."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; got {type(value).__name__}")
    if kind is not None and not TENSOR_KINDS[kind][0](value):
        raise TypeError(f"{name} must be a tensor {TENSOR_KINDS[kind][1]}; got {value.dtype}")
    if shape is not None and tuple(value.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}; got {tuple(value.shape)}")
    return value


def fits_shape(value: torch.Tensor, name: str, shape: tuple[int, ...], of: str) -> None:
    """ValueError unless ``value`` has ``shape`` (that of the argument ``of``) or broadcasts to it."""
    try:
        fits = torch.broadcast_shapes(value.shape, shape) == tuple(shape)
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(f"{name} has shape {tuple(value.shape)}, which is not that of {of}, {tuple(shape)}, nor "
                         f"broadcasts to it")


def table(value, name: str, columns: tuple[str, ...] = ()) -> pd.DataFrame:
    """``value``, a non-empty ``DataFrame`` with ``columns``."""
    if not isinstance(value, pd.DataFrame):
        raise TypeError(f"{name} must be a pandas DataFrame (a run's metrics table); got {type(value).__name__}")
    missing = [c for c in columns if c not in value.columns]
    if missing:
        raise ValueError(f"{name} has no column {', '.join(map(repr, missing))}; its columns: {list(value.columns)}")
    if value.empty:
        raise ValueError(f"{name} is empty: it has no rows")
    return value
