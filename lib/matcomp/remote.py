"""The paper-scale pipeline on a machine lent for minutes (``python -m matcomp remote``): one command,
called again and again, that each time does what is left, within a wall-clock limit:

1. **train** the run (or resume it) and stop cleanly at a checkpoint before the limit (``Paused``);
2. **copy** it in bf16 with the checkpoints the chapters read (the pre- and post-shift models; every one
   of a run without a drop, whose "pre-shift" model is the middle one) into ``<store>/packing/``;
3. **derive** every one-model chapter's key numbers on that copy (``book.stored.paper_scale_derivations``),
   one derivation at a time while time is left (or not at all, ``derive=False``: a loan too short for them
   leaves them to ``python -m matcomp derive`` here, from the bf16 weights it brings home, and needs none of
   the analyses' packages there, cvxpy among them);
4. **pack** into ``out`` the record (config, metrics, summary, derived tables) and one checkpoint, the
   first not packed by an earlier call (or the one named), in parts of at most 15 MiB with their SHA-256
   (``runs.transfer``).

Its counterpart here, ``python -m matcomp unpack``, verifies the parts and installs the run into
``runs/reference``. Everything but the training runs on the CPU, so the same command is tested at
``--preset smoke`` in CI (``tests/test_remote.py``).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from matcomp.analysis.phases import phases
from matcomp.book.chapter import sizes
from matcomp.config import RunConfig
from matcomp.runs import derived
from matcomp.runs.folder import atomic_write_bytes
from matcomp.runs.run import Run, open_run
from matcomp.runs.shipped import export_reference
from matcomp.runs.store import get_or_train, runs_root
from matcomp.runs.training import Paused
from matcomp.runs.transfer import PART_BYTES, pack_checkpoint, pack_record

PACKING = "packing"  # the working store's folder of bf16 copies, their derived tables and what was packed
DTYPE = torch.bfloat16


@dataclass(frozen=True)
class Progress:
    """What one call did: the files it wrote into ``out``, and a line saying what is left."""

    files: tuple[Path, ...]
    message: str


def kept_steps(run: Run, preset: str) -> list[int]:
    """The checkpoints the bf16 copy keeps: the pre- and post-shift models (``analysis.phases``), or every
    checkpoint after step 0 of a run without a drop (its phases are read from the middle of them)."""
    read = phases(run, paper_steps=sizes(preset).paper_steps)
    return sorted({read.pre, read.post}) if read.dropped else [s for s in run.steps if s > 0] or run.steps


def bf16_copy(run: Run, preset: str, command: str, root: Path) -> Run:
    """The run's bf16 copy in ``root`` (made once, with ``command`` recorded as how it was made)."""
    path = root / run.config.run_id
    if path.exists():
        return open_run(path)
    return export_reference(run, kept_steps(run, preset), command, root=root, dtype=DTYPE)


def _packed_path(root: Path, run: Run) -> Path:
    return root / f"{run.config.run_id}.packed.json"


def remote(cfg: RunConfig, preset: str, out: Path, command: str, limit_s: float | None = None,
           device: str | torch.device | None = None, root: Path | None = None, checkpoint: int | None = None,
           part_bytes: int = PART_BYTES, progress: bool | str = "text", derive: bool = True) -> Progress:
    """One call of the pipeline for ``cfg`` (the chapters' sizes of ``preset``), writing into ``out``
    (see the module docstring). ``root``: the working store's packing folder (default
    ``<store>/packing``); ``checkpoint``: the step to pack instead of the next one not packed; ``derive``
    False: no derived tables (they are computed here after ``unpack``)."""
    started = time.perf_counter()
    out, root = Path(out), Path(root) if root is not None else runs_root() / PACKING
    if out.exists() and not out.is_dir():
        raise ValueError(f"out {out} is a file; name a folder for the packed parts")
    out.mkdir(parents=True, exist_ok=True)
    try:
        run = get_or_train(cfg, device=device, progress=progress, shipped=False, limit_s=limit_s)
    except Paused as paused:
        return Progress((), str(paused))
    copy = bf16_copy(run, preset, command, root)

    if derive:
        from matcomp.book.stored import paper_scale_derivations  # the analyses: their packages only when asked

        derivations = paper_scale_derivations(copy, preset)
    else:
        derivations = []
    tables_root, stems, left = root / "derived", [], 0
    for derivation in derivations:
        key = derivation.key()
        if derived.read(derivation, tables_root, key)[0] is None:
            if limit_s is not None and time.perf_counter() - started > limit_s:
                left += 1
                continue
            derived.write(derivation, derivation.compute(), tables_root, key)
        stems.append(derivation.stem(key))
    tables = sorted(p for stem in stems for p in tables_root.glob(f"{stem}.*"))

    packed_path = _packed_path(root, copy)
    packed = json.loads(packed_path.read_text()) if packed_path.exists() else []
    step = checkpoint if checkpoint is not None else next((s for s in copy.steps if s not in packed), None)
    files = pack_record(copy, tables, out, part_bytes)
    if step is not None:
        files += pack_checkpoint(copy, step, out, part_bytes)
        atomic_write_bytes(packed_path, json.dumps(sorted({*packed, step})).encode())
    unpacked = [s for s in copy.steps if s not in {*packed, step}]
    message = (f"{copy.config.run_id}: trained to step {copy.last_step:,}; "
               + (f"{len(derivations) - left} of {len(derivations)} derived tables" if derive else
                  "no derived tables (python -m matcomp derive computes them after unpack)")
               + (f" (call again for {left} more)" if left else "")
               + f"; packed the record{f' and checkpoint {step:,}' if step is not None else ''} into {out}"
               + (f"; checkpoints {unpacked} are left to pack, one a call" if unpacked else "; nothing left"))
    return Progress(tuple(files), message)
