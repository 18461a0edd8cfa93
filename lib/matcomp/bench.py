"""Throughput benchmark: our training step against a loop equivalent to the paper's code.

Prints figures; asserts nothing. The paper-equivalent loop (EXPERIMENTS.md §1.5, REF ``train.py``)
uses eager attention, makes each batch on the CPU and moves it to the device, passes the training
batch through the model a second time after the update just to log the losses, and evaluates a
fresh batch of 64 matrices every step. Ours uses SDPA attention, samples on the device, logs from
the training forward pass itself and evaluates every ``eval_every`` steps.
"""

from __future__ import annotations

import time

import torch

from matcomp.config import RunConfig
from matcomp.data import sample_batch
from matcomp.metrics import METRICS, masked_mse
from matcomp.model import count_parameters
from matcomp.training import TRAIN_STREAM, autocast, evaluate, init_training, make_generator, train_step

PAPER_EVAL_BATCH = 64


def matmul_peak(device: torch.device, dtype: torch.dtype = torch.float32, size: int = 2048, repeats: int = 5) -> float:
    """Measured FLOP/s of a square matmul: the practical peak of this device."""
    a = torch.randn(size, size, device=device, dtype=dtype)
    a @ a  # warm-up
    _sync(device)
    start = time.perf_counter()
    for _ in range(repeats):
        a @ a
    _sync(device)
    return 2 * size ** 3 * repeats / (time.perf_counter() - start)


def step_flops(cfg: RunConfig) -> float:
    """Matmul FLOPs of one training step (forward + backward = 3 × forward), embeddings excluded."""
    b, s, h, layers = cfg.train.batch, cfg.data.seq_len, cfg.model.hidden, cfg.model.layers
    tokens = b * s
    linear = 2 * tokens * layers * (4 * h * h + 2 * h * cfg.model.intermediate_size)  # QKV, O, MLP
    attention = 2 * 2 * b * layers * s * s * h  # scores and weighted values
    readout = 2 * tokens * h
    return 3 * (linear + attention + readout)


def time_ours(cfg: RunConfig, device: torch.device, steps: int, warmup: int) -> float:
    """Seconds per step of the training engine (``matcomp.training``), eval amortised."""
    model, optimizer, train_gen, eval_gen = init_training(cfg, device)
    for step in range(1, warmup + steps + 1):
        if step == warmup + 1:
            _sync(device)
            start = time.perf_counter()
        train_step(model, optimizer, cfg, train_gen, device)
        if step % cfg.train.eval_every == 0:
            evaluate(model, cfg, eval_gen, cfg.train.eval_batch, device)
    _sync(device)
    return (time.perf_counter() - start) / steps


def time_paper_loop(cfg: RunConfig, device: torch.device, steps: int, warmup: int) -> float:
    """Seconds per step of a loop that does what the paper's ``train.py`` does."""
    model, optimizer, _, _ = init_training(cfg, device, attention="eager")
    cpu_gen = make_generator(cfg.train.seed, TRAIN_STREAM, torch.device("cpu"))
    for step in range(1, warmup + steps + 1):
        if step == warmup + 1:
            _sync(device)
            start = time.perf_counter()
        batch = sample_batch(cfg.data, cfg.train.batch, cpu_gen)
        ids, values, observed = (t.to(device) for t in (batch.ids, batch.values, batch.observed))
        model.train()
        with autocast(cfg.train.precision, device):
            pred = model(ids)
        loss = masked_mse(pred, values, observed)["L"]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        model.eval()
        with torch.no_grad(), autocast(cfg.train.precision, device):
            logged = masked_mse(model(ids), values, observed)  # second pass just to log
            test = sample_batch(cfg.data, PAPER_EVAL_BATCH, cpu_gen)
            test_pred = model(test.ids.to(device))
            logged["eval_L"] = masked_mse(test_pred, test.values.to(device), test.observed.to(device))["L"]
        [logged[k].item() for k in (*METRICS, "eval_L")]  # the reference logs every value every step
    _sync(device)
    return (time.perf_counter() - start) / steps


def benchmark(cfg: RunConfig, device: torch.device, steps: int = 20, warmup: int = 3) -> dict[str, float]:
    """Figures for one config: step times of both loops, throughput, FLOP/s against the peak."""
    ours = time_ours(cfg, device, steps, warmup)
    paper = time_paper_loop(cfg, device, steps, warmup)
    flops = step_flops(cfg)
    peak = matmul_peak(device, torch.bfloat16 if cfg.train.precision == "bf16" else torch.float32)
    model, *_ = init_training(cfg, torch.device("cpu"))
    return {
        "parameters": count_parameters(model),
        "s_per_step": ours,
        "steps_per_s": 1 / ours,
        "matrices_per_s": cfg.train.batch / ours,
        "flops_per_s": flops / ours,
        "peak_flops_per_s": peak,
        "fraction_of_peak": flops / ours / peak,
        "paper_loop_s_per_step": paper,
        "speedup": paper / ours,
    }


def report(name: str, cfg: RunConfig, figures: dict[str, float]) -> str:
    """A Markdown table row of the figures (columns as ``REPORT_HEADER``)."""
    f = figures
    return (
        f"| {name} ({cfg.train.precision}, {f['parameters'] / 1e6:.2f} M params, batch {cfg.train.batch}) "
        f"| {f['s_per_step']:.4f} | {f['steps_per_s']:.2f} | {f['matrices_per_s']:.0f} "
        f"| {f['flops_per_s'] / 1e9:.1f} | {f['peak_flops_per_s'] / 1e9:.0f} | {100 * f['fraction_of_peak']:.0f} % "
        f"| {f['paper_loop_s_per_step']:.4f} | **{f['speedup']:.2f}×** |"
    )


REPORT_HEADER = ("| preset | s/step | steps/s | matrices/s | GFLOP/s | matmul peak GFLOP/s | of peak "
                 "| paper-loop s/step | speed-up |\n|---|---|---|---|---|---|---|---|---|")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()
