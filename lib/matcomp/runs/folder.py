"""The layout of one run folder, and atomic writes into it.

    <run_id>/
        config.json                     the RunConfig
        metrics.parquet                 one row per step (and eval columns every eval_every steps)
        checkpoints/step_000000.safetensors ...   weights, with their model, task and step as metadata
        resume.pt                       model, optimiser and RNG state at the last checkpoint, with the SHA-256
                                        of what its training wrote (checked before it resumes and seals);
                                        kept when finished: a longer budget continues from it
        complete.json                   written last: the run is finished and these files are whole
        README.md                       a shipped paper-scale run's model card, outside the seal (``card``)

Every file is written to a temporary name in the same folder and moved into place with
``os.replace``, so a crash leaves either the old file or the new one, never half of one.

The metrics are Parquet (zstd, floats byte-stream split: about half the bytes of the CSV the runs were
first written in) holding exactly the values the 8-significant-digit CSV held, so a run reads the same
numbers whichever file it was written to. A run folder from before, with its ``metrics.csv``, is read as
it is; training that continues it writes Parquet and removes the CSV.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import tempfile
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save

from matcomp.config import DataConfig, ModelConfig, RunConfig

CHECKPOINT_PATTERN = "step_{:06d}.safetensors"
METRICS, LEGACY_METRICS = "metrics.parquet", "metrics.csv"
METRICS_DIGITS = "%.8g"  # the precision the metrics are kept at (that of the first runs' CSV)
CHECKPOINT_METADATA = "matcomp"  # a checkpoint's safetensors metadata key: what its weights are (JSON)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes files private; run files are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def metrics_bytes(table: pd.DataFrame) -> bytes:
    """A metrics table as Parquet bytes: its floats first rounded as the CSV that runs were first stored
    in rounds them (8 significant digits, parsed back), so that old and new runs hold the same numbers;
    floats byte-stream split and zstd-compressed (level 9: at 19, 4 % smaller and 8 times slower)."""
    table = pd.read_csv(io.StringIO(table.to_csv(index=False, float_format=METRICS_DIGITS)))
    floats = [name for name, dtype in table.dtypes.items() if dtype.kind == "f"]
    arrow = pa.Table.from_pandas(table, preserve_index=False)
    buffer = io.BytesIO()
    pq.write_table(arrow, buffer, compression="zstd", compression_level=9, use_dictionary=False,
                   use_byte_stream_split=floats or False)
    return buffer.getvalue()


def read_metrics_bytes(data: bytes) -> pd.DataFrame:
    """The metrics table that ``metrics_bytes`` wrote."""
    return pq.read_table(io.BytesIO(data)).to_pandas()


SETTLED_S = 2.0  # a file unchanged for this long is hashed once per process; a newer one every time
_DIGESTS: dict[tuple, str] = {}  # (path, inode, size, mtime_ns, ctime_ns) -> SHA-256 of a settled file


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    """The SHA-256 of a file's bytes, computed once per process for a file that has settled (unchanged for
    ``SETTLED_S``: a shipped run is opened several times a chapter, and hashed once). Any write changes the
    file's size or modification time, so it is hashed again; a file written in the last seconds is always
    hashed, since two writes within one tick of the filesystem's clock can leave the same time."""
    stat = os.stat(path)
    key = (os.path.abspath(path), stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)  # ctime: any
    # write or change of the times moves it, so a file rewritten with its old size and mtime is hashed again
    if key in _DIGESTS:
        return _DIGESTS[key]
    digest = file_digest(path, chunk)
    if time.time() - max(stat.st_mtime, stat.st_ctime) > SETTLED_S:
        _DIGESTS[key] = digest
    return digest


def file_digest(path: Path, chunk: int = 1 << 20) -> str:
    """The SHA-256 of a file's bytes, read now."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


STATE_DIGEST = "state_sha256"  # the resume state's key for the SHA-256 of the rest of it


def state_digest(state) -> str:
    """The SHA-256 of a training state's contents: every tensor's bytes and every other value's text, in order."""
    digest = hashlib.sha256()

    def add(value) -> None:
        if isinstance(value, dict):
            for key in sorted(value, key=str):
                digest.update(f"<{key!s}>".encode())
                add(value[key])
        elif isinstance(value, (list, tuple)):
            for item in value:
                add(item)
        elif isinstance(value, torch.Tensor):
            digest.update(f"{value.dtype}{list(value.shape)}".encode())
            digest.update(value.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
        else:
            digest.update(repr(value).encode())

    add({key: value for key, value in state.items() if key != STATE_DIGEST})
    return digest.hexdigest()


def checkpoint_shapes(path: Path | str) -> dict[str, list[int]]:
    """The shape of every tensor a checkpoint file holds, read from its header alone."""
    with safe_open(str(path), framework="pt") as f:
        return {name: list(f.get_slice(name).get_shape()) for name in f.keys()}


def checkpoint_metadata(path: Path | str) -> tuple[ModelConfig, DataConfig, int] | None:
    """The model, task and step a checkpoint file carries (``RunFolder.write_checkpoint``): enough to
    build its model (``matcomp.models.factory.build_model``) and read its tokens without its folder.
    None for a checkpoint written before they carried it (the runs shipped until then)."""
    with safe_open(str(path), framework="pt") as f:
        text = (f.metadata() or {}).get(CHECKPOINT_METADATA)
    if text is None:
        return None
    described = json.loads(text)
    return ModelConfig(**described["model"]), DataConfig(**described["data"]), int(described["step"])


class RunFolder:
    """Paths and atomic reads/writes of one run folder."""

    def __init__(self, path: Path | str):
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must name a run folder (a str or Path); got {type(path).__name__} {path!r}")
        if not str(path).strip():
            raise ValueError("path is empty: name a run folder")
        self.path = Path(path)

    config_path = property(lambda self: self.path / "config.json")
    resume_path = property(lambda self: self.path / "resume.pt")
    complete_path = property(lambda self: self.path / "complete.json")
    checkpoint_dir = property(lambda self: self.path / "checkpoints")

    def checkpoint_path(self, step: int) -> Path:
        return self.checkpoint_dir / CHECKPOINT_PATTERN.format(step)

    # --- config -------------------------------------------------------------------------------
    def write_config(self, cfg: RunConfig) -> None:
        atomic_write_bytes(self.config_path, cfg.to_json().encode())

    def read_config(self) -> RunConfig:
        return RunConfig.from_json(self.config_path.read_text())

    # --- metrics ------------------------------------------------------------------------------
    @property
    def metrics_path(self) -> Path:
        """``metrics.parquet``, or the ``metrics.csv`` of a folder written before Parquet (and not since)."""
        legacy = self.path / LEGACY_METRICS
        return legacy if legacy.exists() and not (self.path / METRICS).exists() else self.path / METRICS

    def write_metrics(self, table: pd.DataFrame) -> str:
        """The table, its floats as the 8-significant-digit CSV held them, as Parquet (``metrics_bytes``); returns
        the SHA-256 of the bytes written (recorded in the resume state, checked before a resume trusts them)."""
        data = metrics_bytes(table)
        atomic_write_bytes(self.path / METRICS, data)
        (self.path / LEGACY_METRICS).unlink(missing_ok=True)
        return hashlib.sha256(data).hexdigest()

    def read_metrics(self) -> pd.DataFrame:
        path = self.metrics_path
        return pd.read_csv(path) if path.suffix == ".csv" else read_metrics_bytes(path.read_bytes())

    # --- checkpoints --------------------------------------------------------------------------
    def write_checkpoint(self, step: int, state_dict: dict[str, torch.Tensor], cfg: RunConfig) -> str:
        """The weights after ``step`` updates, with their model and task in the file's metadata, so that one
        checkpoint file, copied anywhere, still says what it holds (``checkpoint_metadata``). Not the whole
        config: a run continued to a longer budget links its shorter base's files, whose bytes must be
        those of the longer run trained from scratch. One key, since safetensors orders several at random.
        Returns the SHA-256 of the bytes written, which training records to check them before it trusts them."""
        tensors = {k: v.detach().to("cpu").contiguous() for k, v in state_dict.items()}
        described = {"model": dataclasses.asdict(cfg.model), "data": dataclasses.asdict(cfg.data), "step": step}
        metadata = {CHECKPOINT_METADATA: json.dumps(described, sort_keys=True)}
        data = save(tensors, metadata=metadata)
        atomic_write_bytes(self.checkpoint_path(step), data)
        return hashlib.sha256(data).hexdigest()

    def existing_checkpoint(self, step: int) -> Path:
        """The checkpoint file of ``step``; a ValueError naming the steps there are if it has none."""
        path = self.checkpoint_path(step)
        if not path.exists():
            raise ValueError(f"no checkpoint at step {step} in {self.path}; available: {self.checkpoint_steps()} (a "
                             f"shipped run keeps only those the chapters read; --no-shipped trains the whole run)")
        return path

    def read_checkpoint(self, step: int) -> dict[str, torch.Tensor]:
        return load_file(self.existing_checkpoint(step))

    def checkpoint_steps(self) -> list[int]:
        return sorted(int(p.stem.split("_")[1]) for p in self.checkpoint_dir.glob("step_*.safetensors"))

    def remove_unwritten(self, written: dict[int, str]) -> None:
        """Remove every checkpoint file that training has not recorded in ``written`` (step -> SHA-256): what a
        crash between a checkpoint and the resume state left past the step it resumes from, rewritten as
        training reaches it again (``run.written_problem`` refuses one at or before that step)."""
        for step in self.checkpoint_steps():
            if step not in written:
                self.checkpoint_path(step).unlink()

    def last_step(self) -> int:
        """The run's last step: recorded in complete.json (a shipped run may keep no checkpoint at all),
        else its last checkpoint (a run is checkpointed at its last step)."""
        recorded = (self.read_complete() or {}).get("last_step")
        if recorded is not None:
            return int(recorded)
        steps = self.checkpoint_steps()
        if not steps:
            raise ValueError(f"{self.path} records no last step and holds no checkpoint")
        return steps[-1]

    # --- resume state and completion --------------------------------------------------------------
    def write_resume(self, state: dict) -> None:
        """The training state, with the SHA-256 of its contents (``state_digest``): PyTorch's archive checks no
        bytes, so a damaged one would load, and training would go on from other weights or moments."""
        buffer = io.BytesIO()
        torch.save({**state, STATE_DIGEST: state_digest(state)}, buffer)
        atomic_write_bytes(self.resume_path, buffer.getvalue())

    def read_resume(self, mmap: bool = False) -> dict | None:
        """The training state at the last checkpoint (None: there is none), its contents checked against the
        SHA-256 it was written with (a ValueError naming it if they differ, or if it has none); ``mmap``: its
        tensors left on disk, unchecked, for what asks only of its step and records."""
        if not self.resume_path.exists():
            return None
        state = torch.load(self.resume_path, weights_only=True, map_location="cpu", mmap=mmap)
        if not mmap and state.pop(STATE_DIGEST, None) != state_digest(state):
            raise ValueError(f"{self.resume_path} is damaged: its contents differ from the SHA-256 it was written with")
        return state

    def resume_step(self) -> int | None:
        """The step ``resume.pt`` resumes from (None: there is none), read without loading its weights and
        optimiser moments (memory-mapped): what the plan and the budget check ask of a partial run."""
        resume = self.read_resume(mmap=True)
        return None if resume is None else int(resume["step"])

    def write_complete(self, summary: dict) -> None:
        atomic_write_bytes(self.complete_path, json.dumps(summary, indent=2).encode())

    def files(self) -> list[Path]:
        """The files a finished run consists of: the config, the metrics and every checkpoint."""
        return sorted([self.config_path, self.metrics_path, *self.checkpoint_dir.glob("*.safetensors")])

    def sizes(self) -> dict[str, int]:
        """Size in bytes of every file of the run, keyed by its path in the folder."""
        return {str(p.relative_to(self.path)): p.stat().st_size for p in self.files()}

    def digests(self) -> dict[str, str]:
        """SHA-256 of every file of the run, keyed by its path in the folder."""
        return {str(p.relative_to(self.path)): sha256_file(p) for p in self.files()}

    def fingerprint(self) -> dict[str, dict]:
        """What complete.json records to detect any later change: every file's size and SHA-256."""
        return {"files": self.sizes(), "sha256": self.digests()}

    def read_complete(self) -> dict | None:
        """The run's seal (None: not finished); a seal that is not a JSON object is a ValueError naming it."""
        if not self.complete_path.exists():
            return None
        try:
            summary = json.loads(self.complete_path.read_bytes())
        except ValueError as err:  # not JSON, or not text
            raise ValueError(f"{self.complete_path} is damaged: not valid JSON ({err})") from None
        if not isinstance(summary, dict):
            raise ValueError(f"{self.complete_path} is damaged: a JSON {type(summary).__name__}, not an object")
        return summary

