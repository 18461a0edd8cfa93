"""Throughput benchmark: our training step against a loop equivalent to the paper's code.

Prints figures; asserts nothing. The paper-equivalent loop (the authors' ``train.py``)
uses eager attention, makes each batch on the CPU and moves it to the device, passes the training
batch through the model a second time after the update just to log the losses, and evaluates a
fresh batch of 64 matrices every step. Ours uses SDPA attention, draws its batches on the CPU too (so a
run's data do not depend on the device), logs from the training forward pass itself and evaluates every
``eval_every`` steps, by each engine asked for (``matcomp.runs.engines.ENGINES``): an engine that cannot
run here, or fails, is reported with its reason, and the fastest of the others is the figure compared.
"""

from __future__ import annotations

import time

import torch

from matcomp.config import RunConfig
from matcomp.data import sample_batch
from matcomp.metrics import METRICS, masked_mse
from matcomp.models.factory import count_parameters
from matcomp.runs.cost import matmul_peak, step_flops, sync, time_steps
from matcomp.runs.engines import ENGINES, engine_problem
from matcomp.runs.training import autocast, init_training, matmuls
from matcomp.seeding import TRAIN, stream

PAPER_EVAL_BATCH = 64


def time_paper_loop(cfg: RunConfig, device: torch.device, steps: int, warmup: int) -> float:
    """Seconds per step of a loop that does what the paper's ``train.py`` does."""
    model, optimizer, _, _ = init_training(cfg, device, attention="eager")
    cpu_gen = stream(cfg.train.seed, TRAIN)
    for step in range(1, warmup + steps + 1):
        if step == warmup + 1:
            sync(device)
            start = time.perf_counter()
        batch = sample_batch(cfg.data, cfg.train.batch, cpu_gen).to(device)
        ids, values, observed = batch.ids, batch.values, batch.observed
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
    sync(device)
    return (time.perf_counter() - start) / steps


def time_engines(cfg: RunConfig, device: torch.device, steps: int, warmup: int,
                 engines: tuple[str, ...] = ENGINES) -> dict[str, float | str]:
    """Seconds per step of each engine of ``engines`` on ``cfg``, or why it did not run (it cannot here, or it
    failed: the reason, in one line)."""
    timings: dict[str, float | str] = {}
    for engine in engines:
        problem = engine_problem(engine, cfg, device)
        if problem is not None:
            timings[engine] = problem
            continue
        try:
            timings[engine] = time_steps(cfg, device, steps, warmup, engine)
        except Exception as err:  # a capture that fails on this machine's software: reported, not fatal
            timings[engine] = f"failed: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"[:300]
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return timings


def fastest(timings: dict[str, float | str]) -> str:
    """The engine of ``timings`` with the shortest step (ValueError when none ran)."""
    ran = {engine: t for engine, t in timings.items() if isinstance(t, float)}
    if not ran:
        raise ValueError(f"no engine ran: {timings}")
    return min(ran, key=lambda engine: ran[engine])


def benchmark(cfg: RunConfig, device: torch.device, steps: int = 20, warmup: int = 3,
              engines: tuple[str, ...] = ("eager",)) -> dict:
    """Figures for one config: step times of each engine and of the paper's loop, and the fastest engine's
    throughput and FLOP/s against the peak."""
    timings = time_engines(cfg, device, steps, warmup, engines)
    engine = fastest(timings)
    ours = timings[engine]
    assert isinstance(ours, float)
    with matmuls(cfg.train.precision):  # the matrix products the run would use, and their peak
        paper = time_paper_loop(cfg, device, steps, warmup)
        peak = matmul_peak(device, torch.bfloat16 if cfg.train.precision == "bf16" else torch.float32)
    flops = step_flops(cfg)
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
        "engine": engine,
        "engines": timings,
    }


def report(name: str, cfg: RunConfig, figures: dict) -> str:
    """A Markdown table row of the figures (columns as ``REPORT_HEADER``)."""
    f = figures
    return (
        f"| {name} ({cfg.train.precision}, {f['parameters'] / 1e6:.2f} M params, batch {cfg.train.batch}, "
        f"{f['engine']}) "
        f"| {f['s_per_step']:.4f} | {f['steps_per_s']:.2f} | {f['matrices_per_s']:.0f} "
        f"| {f['flops_per_s'] / 1e9:.1f} | {f['peak_flops_per_s'] / 1e9:.0f} | {100 * f['fraction_of_peak']:.0f} % "
        f"| {f['paper_loop_s_per_step']:.4f} | **{f['speedup']:.2f}×** |"
    )


REPORT_HEADER = ("| preset | s/step | steps/s | matrices/s | GFLOP/s | matmul peak GFLOP/s | of peak "
                 "| paper-loop s/step | speed-up |\n|---|---|---|---|---|---|---|---|---|")


def engine_report(figures: dict) -> str:
    """One line per engine timed (its s/step and speed-up over the paper's loop, or why it did not run), and
    last the fastest's name, for a script to read (``fastest engine: NAME``)."""
    paper = figures["paper_loop_s_per_step"]
    lines = [f"  {engine:6} {t:.4f} s/step, {paper / t:.2f}x the paper loop" if isinstance(t, float) else
             f"  {engine:6} not timed: {t}" for engine, t in figures["engines"].items()]
    return "\n".join(["engines:", *lines, f"  paper loop {paper:.4f} s/step", f"fastest engine: {figures['engine']}"])
