"""What machine a run was trained on: results are bit-for-bit repeatable only on the same CPU
model, thread count and PyTorch version."""

from __future__ import annotations

import platform

import torch


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def machine() -> dict[str, object]:
    """CPU model, torch threads, torch version and GPU (if any)."""
    return {
        "cpu": cpu_model(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
    }


def describe(info: dict[str, object] | None = None) -> str:
    """One line, e.g. ``Intel(R) Xeon(R) Processor, 2 threads, torch 2.13.0+cpu``."""
    info = info or machine()
    gpu = f", {info['gpu']}" if info.get("gpu") else ""
    return f"{info['cpu']}, {info['threads']} threads{gpu}, torch {info['torch']}"
