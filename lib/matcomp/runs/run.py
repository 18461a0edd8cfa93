"""A finished run on disk (``Run``), and the checks that a run folder is whole (``verify``) and that its
metrics table is (``table_problem``)."""

from __future__ import annotations

import math
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from matcomp.config import RunConfig
from matcomp.drop import Drop, detect_drop
from matcomp.models.bert import MatrixBert
from matcomp.models.factory import Model, build_model, metric_names
from matcomp.models.gpt import MatrixGPT
from matcomp.runs.folder import RunFolder, checkpoint_metadata, checkpoint_shapes, sha256_file
from matcomp.runs.training import resolve_device


class Run:
    """A finished training run: its config, metrics table and checkpoints. Every file it reads is checked
    first against the SHA-256 its ``complete.json`` records (``ValueError`` naming the file), so a run
    changed since it finished is never read as it; ``verify`` checks the whole folder at once."""

    def __init__(self, path: Path | str):
        self.folder = RunFolder(path)
        self.path = self.folder.path
        summary = self.folder.read_complete()
        if summary is None:
            raise ValueError(f"{self.path} is not a finished run: complete.json is missing")
        self.summary: dict = summary
        self._check(self.folder.config_path)
        self.config = self.folder.read_config()
        problem = name_problem(self.folder, self.config)
        if problem:
            raise ValueError(f"{self.path} is not a finished run as sealed: {problem}")

    def _check(self, path: Path) -> None:
        """ValueError unless ``path`` holds the bytes complete.json records for it."""
        name = path.relative_to(self.path).as_posix()
        recorded = self.summary.get("sha256", {}).get(name)
        if recorded is None or not path.exists() or sha256_file(path) != recorded:
            raise ValueError(f"{self.path} is not a finished run as sealed: {name} is missing, unrecorded or has "
                             f"changed since it finished (its SHA-256 differs from complete.json's); restore it "
                             f"from git or train the run again")

    def __repr__(self) -> str:
        return f"Run({self.config.run_id}, steps={self.config.train.steps}, path={self.path})"

    @cached_property
    def metrics(self) -> pd.DataFrame:
        """One row per step: ``step, L, L_obs, L_mask, mask_value, eval_*, time_s``."""
        self._check(self.folder.metrics_path)
        return self.folder.read_metrics()

    @cached_property
    def steps(self) -> list[int]:
        """Steps with a saved checkpoint (a shipped run may keep few, or none: its metrics alone), read once: a
        ``Run`` is a finished run, whose folder no longer changes."""
        return self.folder.checkpoint_steps()

    @property
    def last_step(self) -> int:
        """The run's last step: ``train.steps``, or earlier if it stopped after its drop (``train.stop_after_drop``)."""
        return self.folder.last_step()

    def checkpoint(self, step: int, device: str | torch.device = "cpu", attention: str | None = None) -> Model:
        """The model after ``step`` updates, in eval mode (``step`` must be in ``self.steps``), on ``device``
        (``training.resolve_device``: one that is not here is refused before the model is built)."""
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)):
            raise TypeError(f"checkpoint: step must be an integer, one of {self.steps}; got {step!r}")
        try:
            device = resolve_device(device)
        except ValueError as err:
            raise ValueError(f"checkpoint: {err}") from None
        cfg = self.config
        model = build_model(cfg.model, seed=cfg.train.seed, attention=attention or cfg.train.attention)
        path = self.folder.checkpoint_path(step)
        if path.exists() or path.relative_to(self.path).as_posix() in self.summary.get("sha256", {}):
            self._check(path)  # one never kept is named by read_checkpoint, with those that are
        model.load_state_dict(self.folder.read_checkpoint(step))
        return model.to(device).eval()

    def bert(self, step: int, device: str | torch.device = "cpu", attention: str | None = None) -> MatrixBert:
        """The checkpoint at ``step`` of a BERT run (the analyses' model); ValueError for a GPT run."""
        model = self.checkpoint(step, device, attention)
        if not isinstance(model, MatrixBert):
            raise ValueError(f"{self.config.run_id} is a {self.config.model.arch} run; this analysis needs a BERT")
        return model

    def gpt(self, step: int, device: str | torch.device = "cpu") -> MatrixGPT:
        """The checkpoint at ``step`` of a GPT run (App. G's decoder); ValueError for a BERT run."""
        model = self.checkpoint(step, device)
        if not isinstance(model, MatrixGPT):
            raise ValueError(f"{self.config.run_id} is a {self.config.model.arch} run; this analysis needs a GPT")
        return model

    def nearest_step(self, step: float, trained: bool = False) -> int:
        """The checkpointed step closest to ``step``; with ``trained``, among those after step 0 where the
        run has any (the phases' models are trained ones)."""
        if isinstance(step, bool) or not isinstance(step, (int, float, np.integer, np.floating)):
            raise TypeError(f"nearest_step: step must be a number (a step of the run, 0 to {self.last_step}); got "
                            f"{type(step).__name__} {step!r}")
        if not math.isfinite(step):
            raise ValueError(f"nearest_step: step must be a finite number (0 to {self.last_step}); got {step!r}")
        if not self.steps:
            raise ValueError(f"{self.config.run_id} is shipped with its metrics alone, no checkpoint: train it "
                             f"(python -m matcomp train ... --no-shipped) to analyse its models")
        steps = [s for s in self.steps if s > 0] if trained else []
        return min(steps or self.steps, key=lambda s: abs(s - step))

    @cached_property
    def drop(self) -> Drop:
        """Plateau and drop of L_mask (``matcomp.drop``); a GPT run has none (ValueError): its
        cross-entropy is not an MSE, and its shift is when it learns to copy (``analysis.gpt.copy_onset``)."""
        if self.config.model.arch != "bert":
            raise ValueError(f"{self.config.run_id} is a {self.config.model.arch} run, trained on cross-entropy: "
                             f"detect_drop does not apply; use matcomp.analysis.gpt.copy_onset")
        return detect_drop(self.metrics)


def verify(folder: RunFolder, cfg: RunConfig | None = None) -> str | None:
    """Why a finished run folder cannot be trusted, or None if it can: complete.json must list every
    file with its size and SHA-256, every byte must still match, and every checkpoint must say it holds
    this run's model and task at its own step (``checkpoint_metadata``: a file sealed into the wrong run)."""
    try:
        summary = folder.read_complete()
    except ValueError as err:
        return str(err)
    if summary is None:
        return "complete.json is missing"
    try:
        stored = folder.read_config()
    except (OSError, ValueError) as err:
        return f"config.json is unreadable ({err})"
    if cfg is not None and stored.hash != cfg.hash:
        return "config.json differs from the requested config"
    sizes, recorded = summary.get("files"), summary.get("sha256")
    if not isinstance(sizes, dict) or not all(isinstance(size, int) for size in sizes.values()):
        return "complete.json records no size of its files (its 'files' is missing or not file: bytes)"
    for name, size in sizes.items():
        path = folder.path / name
        if not path.exists() or path.stat().st_size != size:
            return f"{name} is missing or has the wrong size"
    if not isinstance(recorded, dict):
        return "complete.json records no SHA-256 of its files"
    if set(recorded) != set(sizes):
        return "complete.json lists different files by size and by SHA-256"
    for name, digest in recorded.items():
        if sha256_file(folder.path / name) != digest:
            return f"{name} has changed since the run finished (its SHA-256 differs)"
    for step, digest in summary.get("checkpoint_sha256", {}).items():  # what its training recorded (runs.transfer)
        name = folder.checkpoint_path(int(step)).relative_to(folder.path).as_posix()
        if name in recorded and recorded[name] != digest:
            return f"{name} is not the checkpoint the run's training recorded (sealed over another's bytes)"
    for step in folder.checkpoint_steps():  # a checkpoint file also says what it holds: it must be this run's
        carried = checkpoint_metadata(folder.checkpoint_path(step))
        if carried is not None and carried != (stored.model, stored.data, step):
            return (f"{folder.checkpoint_path(step).name} holds the weights of another model, task or step than the "
                    f"run's (its metadata: step {carried[2]}, {carried[0]}, {carried[1]})")
    try:
        last = folder.last_step()
    except (TypeError, ValueError) as err:  # a last_step recorded that is not a number is damage too
        return f"complete.json's last_step is damaged ({err})" if isinstance(err, TypeError) else str(err)
    return name_problem(folder, stored) or table_problem(folder.read_metrics(), stored, last)


def name_problem(folder: RunFolder, stored: RunConfig) -> str | None:
    """Why ``folder`` cannot hold the run of its config ``stored``: its name is another run's id (a run copied
    under another's folder is read by that name, with this one's losses), or None."""
    if folder.path.name == stored.run_id:
        return None
    return (f"the folder is named {folder.path.name} but holds run {stored.run_id} (its config.json): a run copied "
            f"under another run's name; move it back to {stored.run_id}")


def folder_problem(folder: RunFolder, cfg: RunConfig) -> str | None:
    """Why the folder of ``cfg``'s run cannot be used as it is, or None: a finished one must be whole
    (``verify``); an unfinished one that resumes must hold ``cfg``'s config, a table to its resume step and the
    checkpoints its training wrote, each as written (``written_problem``). Any unreadable file is such a reason."""
    if folder.complete_path.exists():
        return verify(folder, cfg)
    try:
        if folder.read_config().hash != cfg.hash:
            return "config.json differs from the requested config"
        resume = folder.read_resume()
        if resume is not None:
            return (table_problem(folder.read_metrics(), cfg, int(resume["step"]), finite=False)
                    or written_problem(folder, cfg, resume))
    except Exception as err:  # any unreadable file means: do not trust this folder
        return f"unreadable files ({type(err).__name__}: {err})"
    return None


def written_problem(folder: RunFolder, cfg: RunConfig, resume: dict, sealing: bool = False) -> str | None:
    """Why the checkpoints of ``cfg``'s unfinished run cannot be trained on (or, with ``sealing``, sealed), or
    None. ``resume`` (its ``resume.pt``) must be ``cfg``'s and record the SHA-256 of its metrics, which must hold
    them, and of every checkpoint its training wrote, each of which must still be there, say it holds ``cfg``'s
    model and task at its own step, have the shapes of the weights resumed and hold the bytes recorded. A
    checkpoint never recorded is foreign at or before the step resumed from; past it, a crash's leftover that
    training removes and writes again (``RunFolder.remove_unwritten``): at sealing, none may be left."""
    written, step = resume.get("checkpoint_sha256"), int(resume["step"])
    if resume.get("run") is None or not isinstance(written, dict) or "metrics_sha256" not in resume:
        return ("resume.pt records neither its run nor the SHA-256 of its checkpoints and metrics (written before "
                "they were kept), so they cannot be checked")
    if resume["run"] != cfg.hash:
        return f"resume.pt is the training state of another run (config hash {resume['run']}, not {cfg.hash})"
    if sha256_file(folder.metrics_path) != resume["metrics_sha256"]:
        return (f"{folder.metrics_path.name} has changed since its training wrote it"
                f" (its SHA-256 differs from resume.pt's)")
    if step not in written:
        return f"resume.pt records no checkpoint at its own step {step}"
    foreign = [s for s in folder.checkpoint_steps() if s not in written and (sealing or s <= step)]
    if foreign:
        return f"{folder.checkpoint_path(foreign[0]).name} is not a checkpoint that this run's training wrote"
    shapes = {name: list(tensor.shape) for name, tensor in resume["model"].items()}
    for s, digest in sorted(written.items()):
        path = folder.checkpoint_path(s)
        if not path.exists():
            return f"{path.name} is missing (its training wrote it)"
        try:
            carried, held = checkpoint_metadata(path), checkpoint_shapes(path)
        except Exception as err:  # a header that does not parse, whatever the library raises
            return f"{path.name} is unreadable ({type(err).__name__}: {err})"
        if (carried is not None and carried != (cfg.model, cfg.data, s)) or held != shapes:
            return f"{path.name} holds the weights of another model, task or step than the run's"
        if sha256_file(path) != digest:
            return f"{path.name} has changed since its training wrote it (its SHA-256 differs from resume.pt's record)"
    return None


def table_problem(metrics: pd.DataFrame, cfg: RunConfig, last_step: int | None = None,
                  finite: bool = True) -> str | None:
    """Why a metrics table cannot be a run's record up to ``last_step`` (its own last step if None), or
    None: it must hold one row per step from 1 to ``last_step``, in order (a table may run past it
    where a crash fell between writing the table and the resume state), and with ``finite`` every
    per-step metric must be a finite number (a NaN is a diverged run, never a finished one)."""
    steps = metrics["step"].to_numpy()
    last = int(steps[-1]) if len(steps) else 0
    last_step = last if last_step is None else last_step
    if last_step < 1:
        return "the metrics table is empty"
    if last < last_step or not np.array_equal(steps[:last_step], np.arange(1, last_step + 1)):
        gaps = sorted(set(range(1, last_step + 1)) - set(steps.tolist()))
        where = f"steps {gaps[0]}-{gaps[-1]} are missing" if gaps else "its steps are out of order or repeated"
        return f"the metrics table does not hold every step from 1 to {last_step}: {where}"
    if finite:
        for name in metric_names(cfg.model):
            values = metrics[name].to_numpy()[:last_step]
            bad = ~np.isfinite(values)
            if bad.any():
                first = int(steps[np.argmax(bad)])
                return f"{name} is not finite from step {first} on ({values[bad][0]}): the run diverged"
    return None


def open_run(path: Path | str) -> Run:
    """A finished run from its folder; raises ``ValueError`` if the folder is not whole (or not named by its run
    id), ``TypeError`` if ``path`` is not a path."""
    problem = verify(RunFolder(path))
    if problem:
        raise ValueError(f"{path} is not a finished run: {problem}")
    return Run(path)


def summarize(path: Path | str) -> str:
    """One line on a run folder, finished or not: steps done, s/step, final losses and the drop."""
    folder = RunFolder(path)
    if folder.config_path.exists() and not folder.metrics_path.exists():
        return f"{folder.path.name} [started] no checkpoint yet (metrics are written at each checkpoint)"
    try:
        cfg, metrics = folder.read_config(), folder.read_metrics()
    except (OSError, ValueError) as err:
        return f"{folder.path.name}: unreadable ({err})"
    last, seconds = metrics.iloc[-1], metrics["time_s"].dropna().iloc[-1]
    status = "unfinished"
    if folder.complete_path.exists():
        problem = verify(folder)  # what "finished" means everywhere: every byte as sealed, the table whole
        status = f"damaged: {problem}" if problem else "finished"
    if cfg.model.arch != "bert":
        drop = "no L_mask drop (cross-entropy; see the gpt chapter's copy onset)"
    else:
        try:
            drop = str(detect_drop(metrics))
        except ValueError:
            drop = "too short to tell"
    return (f"{folder.path.name} [{status}] {int(last.step)}/{cfg.train.steps} steps, "
            f"{seconds / last.step:.4f} s/step, {seconds / 60:.1f} min | {metrics_text(last, cfg)} | {drop}")


def metrics_text(row: pd.Series, cfg: RunConfig) -> str:
    """One row of a metrics table as text, e.g. ``L 0.01, L_obs 1e-4, L_mask 0.03`` (a run's final loss is
    ``drop.final_losses``, a mean; this is the row as it stands)."""
    return ", ".join(f"{k} {row[k]:.3g}" for k in metric_names(cfg.model))
