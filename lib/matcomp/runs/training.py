"""Online Adam training of the paper's models (NeurIPS §2.2, App. D).

Every step draws a fresh batch (on the CPU, whatever device trains), takes one Adam step on the MSE
over all entries, and logs L, L_obs, L_mask and mask_value *from that same forward pass* (the reference
code runs a second forward pass just to log; that costs ~17 % and tells nothing new, since there
is no dropout). So the row for step s holds the loss of the batch of update s, measured with the
weights before that update. Every ``eval_every`` steps a fresh batch from a separate generator
is evaluated with the weights after the update (columns ``eval_*``). A mixture of sizes
(``data.sizes``, App. I) draws each step's size from the training generator and evaluates every
size on its own batch (columns ``eval_*_n<n>``; ``eval_*`` is then the largest size).

At every scheduled step the weights are saved, the metrics table is rewritten and the full
training state (weights, Adam moments, both generators) is saved to ``resume.pt``, so an
interrupted run continues exactly as if it had never stopped. With ``train.stop_after_drop`` the run
ends at the first checkpoint that far past its drop step. Given a wall-clock ``limit_s``, training stops
(``Paused``) at the last scheduled checkpoint whose successor it could not reach in time, at the pace of
the steps it has taken, so a machine lent for minutes ends with a resumable run and no extra checkpoint.
"""

from __future__ import annotations

import contextlib
import sys
import time
from typing import cast

import pandas as pd
import torch
from tqdm import tqdm as text_bar
from tqdm.auto import tqdm

from matcomp.config import RunConfig
from matcomp.data import sample_batch, second_moment
from matcomp.drop import drop_settled
from matcomp.models.bert import MatrixBert
from matcomp.models.factory import Model, build_model, metric_names, trainable_parameters
from matcomp.models.recipe import attention_targets, freeze_all_but, grid_positions, recipe_hooks
from matcomp.runs.folder import RunFolder
from matcomp.seeding import EVAL, TRAIN, stream

DISPLAY_EVERY = 25  # steps between progress-bar refreshes of the live losses


class Paused(Exception):
    """Training stopped at a checkpoint before its wall-clock limit; training the same config again
    resumes exactly there."""

    def __init__(self, run_id: str, step: int, steps: int, seconds: float):
        super().__init__(f"run {run_id} paused at its checkpoint of step {step:,} of {steps:,} after {seconds:.0f} s, "
                         f"before its wall-clock limit; the same command resumes it exactly")
        self.run_id, self.step, self.steps = run_id, step, steps


def eval_columns(cfg: RunConfig) -> tuple[str, ...]:
    """``eval_<metric>`` for every metric of the model, then ``eval_<metric>_n<n>`` for every size n
    of a mixture."""
    metrics = metric_names(cfg.model)
    return tuple(f"eval_{k}" for k in metrics) + tuple(f"eval_{k}_n{n}" for n in cfg.data.sizes for k in metrics)


def columns(cfg: RunConfig) -> tuple[str, ...]:
    """The metrics table's columns for ``cfg``: step, the metrics, their eval columns, time_s."""
    return ("step", *metric_names(cfg.model), *eval_columns(cfg), "time_s")


def resolve_device(device: str | torch.device | None = None) -> torch.device:
    """``None`` or "auto" -> CUDA if present, else CPU; a device that is not here is a ValueError
    naming it, before any work."""
    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    allowed = "auto, cpu, cuda or cuda:N"
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"device must be {allowed}; got {device!r}") from None
    if resolved.type not in ("cpu", "cuda") or (resolved.type == "cpu" and resolved.index is not None):
        raise ValueError(f"device must be {allowed}; got {device!r}")
    count = torch.cuda.device_count() if resolved.type == "cuda" else 0
    if resolved.type == "cuda" and count <= (resolved.index or 0):
        raise ValueError(f"device {device!r} is not here: this machine has {count} CUDA device(s); use cpu or auto")
    return resolved


def autocast(precision: str, device: torch.device):
    """bf16 autocast context for ``precision == "bf16"``, else a no-op."""
    if precision == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


@contextlib.contextmanager
def matmuls(precision: str):
    """CUDA float32 matrix products on TF32 tensor cores for ``precision == "tf32"`` and in full fp32
    otherwise (whatever was set before), forward, backward and evaluation alike, until the context ends,
    when the setting is put back."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def init_training(cfg: RunConfig, device: torch.device, attention: str | None = None,
                  trained: dict[str, torch.Tensor] | None = None):
    """A fresh model, its Adam optimiser, and the training and eval generators of ``cfg``.

    With ``train.component`` other than "all", ``trained`` (the state of run ``train.init_from``)
    supplies every other parameter, frozen."""
    tc = cfg.train
    model = build_model(cfg.model, seed=tc.seed, attention=attention or tc.attention, device=device)
    if isinstance(model, MatrixBert):  # RunConfig allows the recipe changes for the BERT only
        if tc.position_init == "grid":
            grid_positions(model, cfg.data.n_rows, cfg.data.n_cols, tc.seed)
        if tc.component != "all":
            if trained is None:
                raise ValueError(f"train.component {tc.component!r} needs the weights of run {tc.init_from!r}")
            freeze_all_but(model, trained, tc.component)
    optimizer = torch.optim.Adam(trainable_parameters(model), lr=tc.lr)  # constant lr, no weight decay
    return model, optimizer, stream(tc.seed, TRAIN), stream(tc.seed, EVAL)


def train(cfg: RunConfig, folder: RunFolder, device: str | torch.device | None = None,
          progress: bool | str = True, trained: dict[str, torch.Tensor] | None = None,
          limit_s: float | None = None) -> pd.DataFrame:
    """Train ``cfg`` into ``folder`` (resuming from ``resume.pt`` if there is one); returns the metrics.
    ``progress`` "text": a plain-text bar on stdout every 30 s (a chapter under papermill logs it).
    ``trained``: the weights of run ``train.init_from`` when only one component trains. ``limit_s``:
    seconds of wall-clock time this call may take; ``Paused`` is raised at the last checkpoint before it
    (at least one checkpoint interval is trained)."""
    if limit_s is not None and not (isinstance(limit_s, (int, float)) and limit_s >= 0):
        raise ValueError(f"limit_s must be a number of seconds >= 0 or None; got {limit_s!r}")
    started = time.perf_counter()
    device = resolve_device(device)
    tc = cfg.train
    model, optimizer, train_gen, eval_gen = init_training(cfg, device, trained=trained)
    targets = attention_targets(cfg.data.n_rows, cfg.data.n_cols, tc.attention_diagonal).to(device)
    rows: list[dict] = []
    start, elapsed = 0, 0.0

    resume = folder.read_resume()
    if resume is not None:
        model.load_state_dict(resume["model"])
        optimizer.load_state_dict(resume["optimizer"])
        train_gen.set_state(resume["train_gen"])
        eval_gen.set_state(resume["eval_gen"])
        start, elapsed = int(resume["step"]), float(resume["elapsed"])
        rows = folder.read_metrics().query("step <= @start").to_dict("records")
    else:
        folder.write_config(cfg)
        folder.write_checkpoint(0, model.state_dict(), cfg)

    schedule = set(tc.checkpoint_schedule)
    pending: list[torch.Tensor] = []  # per-step metrics kept on the device until the next checkpoint
    evals: dict[int, torch.Tensor] = {}
    text = progress == "text"
    bar = (text_bar if text else tqdm)(total=tc.steps, initial=start, disable=not progress, desc=cfg.run_id,
                                       unit="step", mininterval=30.0 if text else 1.0,
                                       file=sys.stdout if text else None)
    t0 = time.perf_counter() - elapsed
    level = second_moment(cfg.data)  # the copying level: a run that starts below half of it has no plateau

    def stopped() -> bool:
        return bool(tc.stop_after_drop) and drop_settled(pd.DataFrame(rows), tc.stop_after_drop, level)

    end = start if resume is not None and stopped() else tc.steps  # a crash after the stopping checkpoint
    paused = None
    with matmuls(tc.precision):
        for step in range(start + 1, end + 1):
            hooks = recipe_hooks(cast(MatrixBert, model), tc, step, targets)
            with hooks or contextlib.nullcontext():
                latest = train_step(model, optimizer, cfg, train_gen, device)
            pending.append(latest)

            if step % tc.eval_every == 0:
                evals[step] = evaluate(model, cfg, eval_gen, tc.eval_batch, device)
            if step in schedule:
                rows += _rows(start_step=step - len(pending) + 1, pending=pending, evals=evals,
                              elapsed=time.perf_counter() - t0, metrics=model.metrics, eval_columns=eval_columns(cfg))
                finite = bool(torch.isfinite(torch.stack(pending)).all())
                pending, evals = [], {}
                _save(folder, cfg, model, optimizer, train_gen, eval_gen, step, rows)
                if stopped() or not finite:
                    break  # the last step is now this checkpoint's (a diverged run is not sealed: see the store)
                if limit_s is not None and _out_of_time(step, start, schedule, end, started, limit_s):
                    paused = Paused(cfg.run_id, step, tc.steps, time.perf_counter() - started)
                    break
            if progress and step % DISPLAY_EVERY == 0:
                bar.set_postfix({k: f"{v:.3g}" for k, v in zip(model.metrics, latest.tolist())}, refresh=False)
            bar.update(1)
    bar.close()
    if paused is not None:
        raise paused
    return pd.DataFrame(rows, columns=columns(cfg))


def _out_of_time(step: int, start: int, schedule: set[int], end: int, started: float, limit_s: float) -> bool:
    """Whether the checkpoint after ``step`` lies beyond ``limit_s`` seconds since ``started`` at this call's
    pace so far (steps ``start`` to ``step``, setup included); False at the last step."""
    following = min((s for s in schedule if step < s <= end), default=None)
    if following is None:
        return False
    spent = time.perf_counter() - started
    return spent + spent / (step - start) * (following - step) > limit_s


def train_step(model: Model, optimizer: torch.optim.Optimizer, cfg: RunConfig,
               generator: torch.Generator, device: torch.device) -> torch.Tensor:
    """One online Adam step on a fresh batch; returns its metrics (``model.metrics`` order, on the device)."""
    data = cfg.data
    if data.sizes:
        pick = torch.randint(len(data.sizes), (1,), generator=generator, device=generator.device)
        data = data.of_size(data.sizes[int(pick)])
    batch = sample_batch(data, cfg.train.batch, generator).to(device)
    with autocast(cfg.train.precision, device):
        losses = model.losses(batch)
    optimizer.zero_grad(set_to_none=True)
    losses["L"].backward()
    optimizer.step()
    return torch.stack([losses[k].detach().float() for k in model.metrics])


@torch.no_grad()
def evaluate(model: Model, cfg: RunConfig, generator: torch.Generator, batch_size: int,
             device: torch.device) -> torch.Tensor:
    """Metrics (in ``model.metrics`` order) on a fresh batch drawn from ``generator``; for a mixture
    of sizes, those of the largest size followed by those of every size in ``data.sizes`` order."""
    sizes = [cfg.data.of_size(n) for n in cfg.data.sizes]
    out = {}
    for data in sizes or [cfg.data]:
        batch = sample_batch(data, batch_size, generator).to(device)
        with autocast(cfg.train.precision, device):
            losses = model.eval_losses(batch)
        out[data.n_rows] = torch.stack([losses[k].float() for k in model.metrics])
    return torch.cat([out[cfg.data.n_rows], *(out[d.n_rows] for d in sizes)])


def _rows(start_step: int, pending: list[torch.Tensor], evals: dict[int, torch.Tensor],
          elapsed: float, metrics: tuple[str, ...], eval_columns: tuple[str, ...]) -> list[dict]:
    """Table rows for the steps since the last checkpoint (one device->host copy)."""
    values = torch.stack(pending).float().cpu().tolist()
    eval_values = {s: v.float().cpu().tolist() for s, v in evals.items()}
    nan = [float("nan")] * len(eval_columns)
    rows = []
    for i, vals in enumerate(values):
        step = start_step + i
        row = {"step": step, **dict(zip(metrics, vals)), **dict(zip(eval_columns, eval_values.get(step, nan))),
               "time_s": float("nan")}
        rows.append(row)
    rows[-1]["time_s"] = elapsed
    return rows


def _save(folder: RunFolder, cfg: RunConfig, model: Model, optimizer: torch.optim.Optimizer,
          train_gen: torch.Generator, eval_gen: torch.Generator, step: int, rows: list[dict]) -> None:
    """Checkpoint, metrics, then the resume state, in that order: whatever a crash leaves behind,
    resume.pt never points past the metrics and weights already on disk."""
    folder.write_checkpoint(step, model.state_dict(), cfg)
    folder.write_metrics(pd.DataFrame(rows, columns=columns(cfg)))
    folder.write_resume({
        "step": step,
        "elapsed": rows[-1]["time_s"],
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "train_gen": train_gen.get_state(),
        "eval_gen": eval_gen.get_state(),
    })
