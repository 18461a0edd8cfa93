"""The paper-scale pipeline on a machine lent for minutes (``python -m matcomp remote``). A lent machine is
given back moments after a command ends and the next one starts bare, so every command here is whole by
itself: it trains the run from step 0 on a store of its own and brings back a verified, installable
result, or nothing is lost but its own minutes. Two kinds of command:

1. **the run** (no ``checkpoint``): train within a wall-clock limit (to the config's last step, or sealed
   where the limit stopped it, the summary saying so: ``stopped``), copy it in bf16 with the checkpoints
   the chapters read (the pre- and post-shift models; every one of a run without a drop), and pack the record
   (config, metrics, summary with the SHA-256 of every bf16 checkpoint) and the last checkpoint; the loan's
   minutes go to training, and ``python -m matcomp derive`` computes the chapters' tables here after ``unpack``;
2. **one checkpoint** (``checkpoint=STEP``): train the same run from step 0 to that checkpoint and pack it
   alone. Training is deterministic on one kind of GPU, so its bytes are those the run's record holds, and
   ``python -m matcomp unpack`` installs it only if they are.

One bf16 copy of the paper's model is about 58 MiB against the 64 MiB a command brings back, so each
command brings back one checkpoint; everything is packed in parts of at most 15 MiB with their SHA-256
(``runs.transfer``). Everything but the training runs on the CPU, so both commands are tested at
``--preset smoke`` in CI (``tests/test_remote.py``); ``scripts/paper_on_gpu.sh`` holds the GPU's.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import torch

from matcomp.analysis.phases import phases
from matcomp.config import RunConfig
from matcomp.runs.engines import WORKSPACE, WORKSPACE_ENV, Engine, as_engine, workspace_problem
from matcomp.runs.run import Run
from matcomp.runs.shipped import export_reference
from matcomp.runs.store import get_or_train, runs_root, seal_stopped, writable_store
from matcomp.runs.training import Paused, resolve_device
from matcomp.runs.transfer import PART_BYTES, checkpoint_item, checkpoint_name, pack_checkpoint, pack_record

PACKING = "packing"  # the working store's folder of bf16 copies
DTYPE = torch.bfloat16


@dataclass(frozen=True)
class Progress:
    """What one command did: the files it wrote into ``out``, and a line saying what it brought and what is left."""

    files: tuple[Path, ...]
    message: str


def kept_steps(run: Run) -> list[int]:
    """The checkpoints the bf16 copy keeps: the pre- and post-shift models (``analysis.phases``), or every
    checkpoint after step 0 of a run without a drop (its phases are read from the middle of them), or the
    last alone of a run too short to have a plateau."""
    try:
        read = phases(run)
    except ValueError:  # too short to read a plateau from
        return [run.last_step]
    return sorted({read.pre, read.post}) if read.dropped else [s for s in run.steps if s > 0] or run.steps


def deterministic(device: torch.device, workspace: str = WORKSPACE) -> None:
    """Make CUDA training repeat itself bit for bit on one kind of GPU (cuBLAS's fixed workspaces, ``workspace``
    as ``CUBLAS_WORKSPACE_CONFIG`` reads it; the deterministic kernels where PyTorch has them), so a later command
    reproduces a checkpoint; memory PyTorch leaves uninitialised is not filled, as the deterministic mode
    otherwise does at a cost. A workspace larger than ``WORKSPACE`` draws PyTorch's warning that only
    ``:4096:8`` and ``:16:8`` are known deterministic: ``python -m matcomp bench --levers`` checks that two
    trainings repeat each other byte for byte before one trains with it. ValueError for a workspace that cannot
    be used on ``device`` (``engines.workspace_problem``)."""
    problem = workspace_problem(workspace, device)
    if problem is not None:
        raise ValueError(problem)
    if device.type != "cuda":
        return
    os.environ[WORKSPACE_ENV] = workspace  # read when cuBLAS starts: before any product
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = False  # type: ignore[attr-defined]


def remote(cfg: RunConfig, out: Path, command: str, limit_s: float | None = None,
           device: str | torch.device | None = None, root: Path | None = None, checkpoint: int | None = None,
           part_bytes: int = PART_BYTES, progress: bool | str = "text", engine: Engine | str = "eager",
           workspace: str = WORKSPACE, writes: Collection[int] | None = None) -> Progress:
    """One command of the pipeline for ``cfg``, writing into ``out`` (see the module docstring). ``root``: the
    working store's packing folder (default ``<store>/packing``); ``checkpoint``: the step to train to and pack
    alone; ``engine``: the training engine and its levers (``matcomp.runs.engines``); ``workspace``: cuBLAS's
    (``deterministic``); ``writes``: the only checkpoints written besides the last (``training.train``): those the
    bf16 copy keeps (``kept_steps``) and the other commands pack, not one every ``train.checkpoint_every``."""
    started = time.perf_counter()
    if checkpoint is not None and (checkpoint not in cfg.train.checkpoint_schedule or checkpoint == 0):
        raise ValueError(f"checkpoint {checkpoint} is not one of {cfg.run_id}'s checkpoints after step 0: "
                         f"{list(cfg.train.checkpoint_schedule[1:])}")
    device = resolve_device(device)
    engine = as_engine(engine)
    out = writable_store(out, "the folder for the packed parts (out)")  # a file, '' or read-only: before training
    root = Path(root) if root is not None else runs_root() / PACKING
    deterministic(device, workspace)
    store = runs_root()
    try:
        run = get_or_train(cfg, device=device, progress=progress, shipped=False, limit_s=limit_s, engine=engine,
                           stop_at=checkpoint, resumable=False, writes=writes)
    except Paused as paused:
        why = (f"at the checkpoint of step {paused.step:,} of {paused.steps:,}, "
               + ("the one this command was asked for" if checkpoint is not None else
                  f"the last its wall-clock limit of {limit_s:.0f} s allowed on {torch.cuda.get_device_name(device)}"
                  if device.type == "cuda" else f"the last its wall-clock limit of {limit_s} s allowed"))
        run = seal_stopped(cfg, store, why, device, time.perf_counter() - started, engine)
    if checkpoint is not None:
        return _one_checkpoint(run, checkpoint, out, part_bytes, command, root)

    copy = bf16_copy(run, kept_steps(run), command, root)
    files = pack_record(copy, out, part_bytes) + pack_checkpoint(copy, copy.last_step, out, part_bytes)
    others = [s for s in copy.steps if s != copy.last_step]
    stopped = copy.summary.get("stopped")
    message = (f"{copy.config.run_id}: trained to step {copy.last_step:,} of {cfg.train.steps:,} by the {engine} engine"
               + (f" (stopped {stopped})" if stopped else "") + "; "
               + "no derived tables (python -m matcomp derive computes them after unpack)"
               + f"; packed the record and checkpoint {copy.last_step:,} into {out}"
               + (f"; its other checkpoints {others} come back one a command (--checkpoint STEP)" if others else ""))
    return Progress(tuple(files), message)


def bf16_copy(run: Run, steps: list[int], command: str, root: Path) -> Run:
    """The run's bf16 copy with the checkpoints at ``steps`` in ``root`` (made anew: a copy left there by
    another command is replaced), ``command`` recorded as how it was made."""
    shutil.rmtree(root / run.config.run_id, ignore_errors=True)
    return export_reference(run, steps, command, root=root, dtype=DTYPE)


def _one_checkpoint(run: Run, step: int, out: Path, part_bytes: int, command: str, root: Path) -> Progress:
    """Pack the bf16 copy of ``run``'s checkpoint at ``step`` alone, its manifest saying which engine trained
    it and the SHA-256 of the float32 file it was rounded from."""
    copy = bf16_copy(run, [step], command, root)
    source = run.summary["sha256"][checkpoint_name(run, step)]
    files = pack_checkpoint(copy, step, out, part_bytes, {"engine": run.summary.get("engine"),
                                                          "trained_sha256": source})
    return Progress(tuple(files), f"{run.config.run_id}: trained to step {step:,} and packed its checkpoint into "
                                  f"{out}; unpack installs it beside the record of the run's own command if its "
                                  f"bytes are those the record holds ({checkpoint_item(step)})")
