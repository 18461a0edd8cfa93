"""What a run costs on this machine: seconds per training step, measured for its shape and cached,
or estimated from its FLOPs where it was never measured (the plan of ``matcomp.book.build.plan``).

A step's cost depends on the shape of the work (matrix size, model, batch, precision), the device
and the threads, not on the seed or the learning rate: measurements are cached by that key in
``<run store>/.step_costs.json`` (written atomically). An estimate divides the step's matmul FLOPs
by half the device's measured matmul peak: close for large models, optimistic for small ones, where
per-step overheads dominate; ``python -m matcomp plan --measure`` replaces estimates by measurements.

``check_budget`` holds a run to what the machine can do before it starts: its memory, disk and time,
estimated from the config, refused with the numbers when beyond (unless the caller forces it).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from matcomp import limits
from matcomp.config import RunConfig
from matcomp.limits import GIB
from matcomp.models.factory import parameter_count
from matcomp.runs.engines import Engine
from matcomp.runs.folder import atomic_write_bytes
from matcomp.runs.training import evaluate, init_training, matmuls, stepper

COSTS_FILE = ".step_costs.json"
EFFICIENCY = 0.5  # fraction of the matmul peak an estimate assumes a step reaches
MEASURE_STEPS, MEASURE_WARMUP = 10, 3  # the steps a measurement times, after its warm-up


@dataclass(frozen=True)
class StepCost:
    seconds: float
    measured: bool  # False: estimated from FLOPs


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def matmul_peak(device: torch.device, dtype: torch.dtype = torch.float32, size: int = 2048, repeats: int = 5) -> float:
    """Measured FLOP/s of a square matmul: the practical peak of this device."""
    a = torch.randn(size, size, device=device, dtype=dtype)
    a @ a  # warm-up
    sync(device)
    start = time.perf_counter()
    for _ in range(repeats):
        a @ a
    sync(device)
    return 2 * size ** 3 * repeats / (time.perf_counter() - start)


def step_flops(cfg: RunConfig) -> float:
    """Matmul FLOPs of one training step (forward + backward = 3 × forward), embeddings excluded;
    for the GPT, whose sequence is twice the matrix plus [SEP], the longer sequence."""
    b, h, layers = cfg.train.batch, cfg.model.hidden, cfg.model.layers
    s = 2 * cfg.data.seq_len if cfg.model.arch == "gpt" else cfg.data.seq_len
    tokens = b * s
    linear = 2 * tokens * layers * (4 * h * h + 2 * h * cfg.model.intermediate_size)  # QKV, O, MLP
    attention = 2 * 2 * b * layers * s * s * h  # scores and weighted values
    readout = 2 * tokens * h
    return 3 * (linear + attention + readout)


@dataclass(frozen=True)
class Trial:
    """A short training timed (``trial``): ``setup_s`` from nothing to the end of the warm-up steps (the model
    made, compiled, captured), ``seconds`` a step after it, and ``digest``, the SHA-256 of the final weights and
    every step's metrics, equal for two trials exactly when they repeat each other byte for byte."""

    setup_s: float
    seconds: float
    digest: str


def trial(cfg: RunConfig, device: torch.device, steps: int, warmup: int, engine: Engine | str = "eager") -> Trial:
    """``warmup`` + ``steps`` steps of ``cfg`` from its initial weights by the training engine ``engine``
    (``matcomp.runs.engines``), eval amortised (one evaluation made in the setup, so a compiled model's eval graph
    is not timed), with the matrix products the run's precision trains with (``matmuls``)."""
    started = time.perf_counter()
    model, optimizer, train_gen, eval_gen = init_training(cfg, device, engine=engine)
    metrics = []
    with matmuls(cfg.train.precision):
        step_once = stepper(engine, model, optimizer, cfg, train_gen, device)
        evaluate(model, cfg, eval_gen, cfg.train.eval_batch, device)
        for step in range(1, warmup + steps + 1):
            if step == warmup + 1:
                sync(device)
                start = time.perf_counter()
            metrics.append(step_once())
            if step % cfg.train.eval_every == 0:
                evaluate(model, cfg, eval_gen, cfg.train.eval_batch, device)
        sync(device)
    seconds = (time.perf_counter() - start) / steps
    digest = hashlib.sha256(torch.stack(metrics).cpu().numpy().tobytes())
    for tensor in model.state_dict().values():
        digest.update(tensor.detach().cpu().reshape(-1).view(torch.uint8).numpy().tobytes())
    return Trial(start - started, seconds, digest.hexdigest())


def time_steps(cfg: RunConfig, device: torch.device, steps: int, warmup: int, engine: Engine | str = "eager") -> float:
    """Seconds per step of the training engine ``engine`` (``trial``); a graph's capture is not timed."""
    return trial(cfg, device, steps, warmup, engine).seconds


def shape_key(cfg: RunConfig, device: torch.device, threads: int) -> str:
    """What a step's cost depends on, as one string."""
    d, m, t = cfg.data, cfg.model, cfg.train
    return (f"{device.type} threads={threads} | {d.n_rows}x{d.n_cols} sizes={list(d.sizes)} | {m.arch} "
            f"{m.hidden}/{m.layers}/{m.heads}/{m.intermediate_size} | batch={t.batch} {t.precision} {t.attention} "
            f"bias={t.attention_bias > 0}")


def duration(seconds: float) -> str:
    """A duration as a reader says it: "45 s", "12 min", "3.5 h", "40 days".

    >>> duration(45), duration(720), duration(12600), duration(40 * 86400)
    ('45 s', '12 min', '3.5 h', '40 days')
    """
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:,.0f} days"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"


class CostBook:
    """Step costs of shapes on one device, cached in ``root``/``COSTS_FILE``."""

    def __init__(self, root: Path, device: torch.device, threads: int):
        self.path, self.device, self.threads = Path(root) / COSTS_FILE, device, threads
        self.measured: dict[str, float] = json.loads(self.path.read_text()) if self.path.exists() else {}
        self._peak: float | None = None

    def cost(self, cfg: RunConfig) -> StepCost:
        """The cached measurement of ``cfg``'s shape, else an estimate from its FLOPs, never below ``step_floor``
        (a small model's step is its Python's: the smoke preset's FLOPs alone gave 0.34 ms for a 5 ms step)."""
        key = shape_key(cfg, self.device, self.threads)
        if key in self.measured:
            return StepCost(self.measured[key], True)
        if self._peak is None:
            self._peak = matmul_peak(self.device)
        return StepCost(max(step_flops(cfg) / (EFFICIENCY * self._peak), step_floor(cfg, self.device)), False)

    def measure(self, cfg: RunConfig, steps: int = MEASURE_STEPS, warmup: int = MEASURE_WARMUP) -> StepCost:
        """Time ``steps`` steps of ``cfg`` (after ``warmup``) and cache the figure for its shape."""
        key = shape_key(cfg, self.device, self.threads)
        if key not in self.measured:
            cfg = cfg.override({"train.component": "all", "train.init_from": ""})  # an upper bound, no parent run
            self.measured[key] = time_steps(cfg, self.device, steps, warmup)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(self.path, json.dumps(self.measured, indent=1, sort_keys=True).encode())
        return StepCost(self.measured[key], True)


TIME_LIMIT_S = 24 * 3600  # a run estimated past this is refused unless forced: the book's longest CPU run is 2 h
FAST_PEAK = {"cpu": 1e12, "cuda": 1e15}  # FLOP/s no device of the kind beats: a lower bound on a run's time
MIN_STEP_S = {"cpu": 1e-3, "cuda": 1e-4}  # no step is faster (Python and kernel launches), whatever its FLOPs


def memory_bytes(cfg: RunConfig) -> float:
    """Peak bytes of one training step: fp32 weights, gradients and Adam's two moments, and the activations
    kept for the backward pass (per layer about s·b·h·(34 + 5·a·s/h) 16-bit values; Korthikanti et al.
    2022), at 4 bytes."""
    b, h, heads, layers = cfg.train.batch, cfg.model.hidden, cfg.model.heads, cfg.model.layers
    s = 2 * cfg.data.seq_len if cfg.model.arch == "gpt" else cfg.data.seq_len
    return 16 * parameter_count(cfg.model) + 2 * layers * s * b * h * (34 + 5 * heads * s / h) * 2


def disk_bytes(cfg: RunConfig) -> float:
    """Bytes a whole run writes: a checkpoint (4 bytes a parameter) at every scheduled step, the resume
    state (weights and Adam's moments) and the metrics table (at most 8 bytes a cell)."""
    checkpoints = len(cfg.train.checkpoint_schedule) * 4 * parameter_count(cfg.model)
    return checkpoints + 12 * parameter_count(cfg.model) + 8 * 12 * cfg.train.steps


def step_floor(cfg: RunConfig, device: torch.device) -> float:
    """Seconds a step of ``cfg`` takes at least on a device of ``device``'s kind (``FAST_PEAK``, ``MIN_STEP_S``):
    known without timing anything, so a run far beyond a bound is refused at once."""
    return max(step_flops(cfg) / FAST_PEAK[device.type], MIN_STEP_S[device.type])


def machine_memory(device: torch.device) -> int:
    """Bytes of memory the device has: the GPU's, or this machine's RAM."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    return limits.ram_bytes()


def memory_problem(cfg: RunConfig, device: torch.device) -> str | None:
    """Why a training step of ``cfg`` cannot fit ``device``'s memory (``memory_bytes``), with both figures, or None."""
    memory, have = memory_bytes(cfg), machine_memory(device)
    if memory <= have:
        return None
    return (f"a step needs about {memory / GIB:,.1f} GiB of memory; this {device.type} has {have / GIB:,.1f} "
            f"(train.batch {cfg.train.batch:,}, model.hidden {cfg.model.hidden})")


def check_budget(cfg: RunConfig, device: torch.device, root: Path, done: int = 0) -> None:
    """ValueError, with the estimate and the machine's figure, for a run that cannot fit this machine's
    memory or disk (at ``root``), or would train past ``TIME_LIMIT_S`` from step ``done``. The time is
    bounded from below first (``FAST_PEAK``, ``MIN_STEP_S``) and measured (``CostBook``) only when that
    bound comes within a tenth of the limit, so ordinary runs pay nothing for the check."""
    problems = [problem for problem in (memory_problem(cfg, device),) if problem]
    disk, free = disk_bytes(cfg), shutil.disk_usage(root).free
    if disk > free:
        problems.append(f"its checkpoints need about {disk / GIB:,.1f} GiB of disk; {root} has {free / GIB:,.1f} free")
    steps = cfg.train.steps - done
    lower = steps * step_floor(cfg, device)
    if lower > TIME_LIMIT_S / 10:
        seconds = CostBook(root, device, torch.get_num_threads()).cost(cfg).seconds * steps
        if seconds > TIME_LIMIT_S:
            problems.append(f"{steps:,} steps would take about {duration(seconds)} here (the limit: "
                            f"{duration(TIME_LIMIT_S)})")
    if problems:
        raise ValueError(f"run {cfg.run_id} is beyond this machine: {'; '.join(problems)}. Shrink it, or train it "
                         f"anyway (python -m matcomp train ... --force; get_or_train(..., force=True))")
