"""What machine a run was trained on: results are bit-for-bit repeatable only on the same CPU
(model and instruction-set flags), thread count and PyTorch version."""

from __future__ import annotations

import hashlib
import platform

import torch


def _cpuinfo(field: str) -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.split(":")[0].strip() == field)
    except (OSError, StopIteration):
        return None


def cpu_model() -> str:
    return _cpuinfo("model name") or platform.processor() or platform.machine()


def cpu_flags() -> str:
    """A short digest of the CPU's instruction-set flags: virtual machines often report a generic
    model name, and the flags (AVX-512, AMX, ...) decide which kernels, hence which rounding, run."""
    flags = " ".join(sorted((_cpuinfo("flags") or "").split()))
    return hashlib.sha256(flags.encode()).hexdigest()[:12]


def machine() -> dict[str, object]:
    """CPU model and flags digest, torch threads, torch version and GPU (if any)."""
    return {
        "cpu": cpu_model(),
        "cpu_flags": cpu_flags(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
    }


def describe() -> str:
    """One line, e.g. ``Intel(R) Xeon(R) Processor, 2 threads, torch 2.13.0+cpu``."""
    info = machine()
    gpu = f", {info['gpu']}" if info.get("gpu") else ""
    return f"{info['cpu']}, {info['threads']} threads{gpu}, torch {info['torch']}"
