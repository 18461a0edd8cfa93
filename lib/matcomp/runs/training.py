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
the steps it has taken, so a machine lent for minutes ends with a resumable run and no extra checkpoint;
given ``stop_at``, it stops (``Paused``) at that checkpoint.

A step runs by an ``Engine`` (``matcomp.runs.engines``: the plain engines eager, ahead and graph, compiled or
not, with or without the all-ones attention mask), each the same update on the same batches;
``python -m matcomp bench --engines`` and ``--levers`` time them; the run's summary records the one it trained with.
Given ``writes``, only those scheduled checkpoints are written, and the one where training stops: a lent machine
spends its minutes training, not writing checkpoints that nothing reads.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Collection
from typing import cast

import pandas as pd
import torch
from tqdm import tqdm as text_bar
from tqdm.auto import tqdm

from matcomp.config import RunConfig
from matcomp.data import Batch, sample_batch, second_moment
from matcomp.drop import drop_settled
from matcomp.models.bert import MatrixBert
from matcomp.models.factory import Model, build_model, metric_names, trainable_parameters
from matcomp.models.recipe import attention_targets, freeze_all_but, grid_positions, nudge_weight, recipe_hooks
from matcomp.runs.engines import Engine, GraphStep, adam, as_engine, engine_problem, pinned, prepare
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
                  trained: dict[str, torch.Tensor] | None = None, engine: Engine | str = "eager"):
    """A fresh model (its levers of ``engine`` applied: ``engines.prepare``), its Adam optimiser (``adam``, for
    ``engine``), and the training and eval generators of ``cfg``.

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
    if tc.init_nudge:
        nudge_weight(model, tc.init_nudge)
    prepare(model, engine)
    optimizer = adam(trainable_parameters(model), tc.lr, engine)
    return model, optimizer, stream(tc.seed, TRAIN), stream(tc.seed, EVAL)


def train(cfg: RunConfig, folder: RunFolder, device: str | torch.device | None = None,
          progress: bool | str = True, trained: dict[str, torch.Tensor] | None = None,
          limit_s: float | None = None, engine: Engine | str = "eager", stop_at: int | None = None,
          resumable: bool = True, writes: Collection[int] | None = None) -> pd.DataFrame:
    """Train ``cfg`` into ``folder`` (resuming from ``resume.pt`` if there is one); returns the metrics.
    ``progress`` "text": a plain-text bar on stdout every 30 s (a chapter under papermill logs it).
    ``trained``: the weights of run ``train.init_from`` when only one component trains. ``limit_s``:
    seconds of wall-clock time this call may take; ``Paused`` is raised at the last checkpoint before it
    (at least one checkpoint interval is trained). ``engine``: an ``Engine`` or the name of one. ``stop_at``: a
    scheduled checkpoint at which ``Paused`` is raised. ``resumable`` False: the metrics and ``resume.pt`` (three
    copies of the weights) are written only where training stops, not at every checkpoint (a machine given
    back after the call keeps nothing to resume from). ``writes``: the scheduled checkpoints written besides the
    one where training stops (None: every one); a resume starts from the last of them."""
    schedule, written_at = _checked_schedule(cfg, limit_s, stop_at, writes)
    started = time.perf_counter()
    device = resolve_device(device)
    problem = engine_problem(engine, cfg, device)
    if problem is not None:
        raise ValueError(problem)
    model, optimizer, train_gen, eval_gen = init_training(cfg, device, trained=trained, engine=engine)
    targets = attention_targets(cfg.data.n_rows, cfg.data.n_cols, cfg.train.attention_diagonal).to(device)
    resumed, start, elapsed, rows, written = _resume(folder, cfg, model, optimizer, train_gen, eval_gen, written_at)
    pending: list[torch.Tensor] = []  # per-step metrics kept on the device until the next checkpoint
    evals: dict[int, torch.Tensor] = {}
    bar = _progress_bar(cfg, progress, start)
    t0 = time.perf_counter() - elapsed
    stopped = _drop_settled(cfg, rows)
    end = start if resumed and stopped() else cfg.train.steps  # a crash after the stopping checkpoint
    paused = None
    with matmuls(cfg.train.precision):
        step_once = stepper(engine, model, optimizer, cfg, train_gen, device)
        for step in range(start + 1, end + 1):
            with recipe_hooks(cast(MatrixBert, model), cfg.train, step, targets) or contextlib.nullcontext():
                latest = step_once()
            pending.append(latest)
            if step % cfg.train.eval_every == 0:
                evals[step] = evaluate(model, cfg, eval_gen, cfg.train.eval_batch, device)
            if step in schedule:
                rows += _rows(start_step=step - len(pending) + 1, pending=pending, evals=evals,
                              elapsed=time.perf_counter() - t0, metrics=model.metrics, eval_columns=eval_columns(cfg))
                finite = bool(torch.isfinite(torch.stack(pending)).all())
                pending, evals = [], {}
                early = stopped() or not finite  # a diverged run is not sealed: see the store
                paused = None if early else _pause_at(cfg, step, (start, end), schedule, stop_at, limit_s, started)
                last = early or step == end or paused is not None
                if last or step in written_at:
                    _save(folder, cfg, model, optimizer, train_gen, eval_gen, step, rows, written,
                          whole=resumable or last)
                if early or paused is not None:
                    break  # the last step is now this checkpoint's
            _show(bar, step, model.metrics, latest, progress)
    bar.close()
    if paused is not None:
        raise paused
    return pd.DataFrame(rows, columns=columns(cfg))


def _checked_schedule(cfg: RunConfig, limit_s: float | None, stop_at: int | None,
                      writes: Collection[int] | None) -> tuple[set[int], set[int]]:
    """The run's checkpoint steps and those ``train`` writes, once its arguments are checked against them."""
    if limit_s is not None and not (isinstance(limit_s, (int, float)) and limit_s >= 0):
        raise ValueError(f"limit_s must be a number of seconds >= 0 or None; got {limit_s!r}")
    schedule = set(cfg.train.checkpoint_schedule)
    if stop_at is not None and (stop_at not in schedule or stop_at == 0):
        raise ValueError(f"stop_at must be one of the run's checkpoints after step 0; got {stop_at!r}, and "
                         f"{cfg.run_id} checkpoints at {sorted(schedule)[1:]}")
    if writes is not None and not set(writes) <= schedule:
        raise ValueError(f"writes must be checkpoints of the run; {sorted(set(writes) - schedule)} are not, and "
                         f"{cfg.run_id} checkpoints at {sorted(schedule)}")
    return schedule, schedule if writes is None else set(writes)


def _resume(folder: RunFolder, cfg: RunConfig, model: Model, optimizer: torch.optim.Optimizer,
            train_gen: torch.Generator, eval_gen: torch.Generator,
            written_at: set[int]) -> tuple[bool, int, float, list[dict], dict[int, str]]:
    """Load the state of ``folder``'s ``resume.pt`` into the model, optimiser and generators, or, without one, start
    the run (its config, and checkpoint 0 if it is written): whether it resumed, the step and elapsed seconds it
    starts from, the metrics rows so far and the checkpoints written (step -> SHA-256)."""
    resume = folder.read_resume()  # its checkpoints checked before (``run.written_problem``, by the store)
    written: dict[int, str] = dict(resume["checkpoint_sha256"]) if resume is not None else {}
    folder.remove_unwritten(written)
    if resume is None:
        folder.write_config(cfg)
        if 0 in written_at:
            written[0] = folder.write_checkpoint(0, model.state_dict(), cfg)
        return False, 0, 0.0, [], written
    model.load_state_dict(resume["model"])
    optimizer.load_state_dict(resume["optimizer"])
    train_gen.set_state(resume["train_gen"])
    eval_gen.set_state(resume["eval_gen"])
    start = int(resume["step"])
    rows = folder.read_metrics().query("step <= @start").to_dict("records")
    return True, start, float(resume["elapsed"]), rows, written


def _progress_bar(cfg: RunConfig, progress: bool | str, start: int):
    """The run's progress bar from step ``start``: tqdm's, or with ``progress`` "text" a plain one on stdout every
    30 s; disabled without ``progress``."""
    text = progress == "text"
    return (text_bar if text else tqdm)(total=cfg.train.steps, initial=start, disable=not progress, desc=cfg.run_id,
                                        unit="step", mininterval=30.0 if text else 1.0,
                                        file=sys.stdout if text else None)


def _drop_settled(cfg: RunConfig, rows: list[dict]) -> Callable[[], bool]:
    """Whether the run has trained ``train.stop_after_drop`` steps past its drop, read from ``rows`` as they grow
    (against its copying level: a run that starts below half of it has no plateau)."""
    level = second_moment(cfg.data)
    return lambda: bool(cfg.train.stop_after_drop) and drop_settled(pd.DataFrame(rows), cfg.train.stop_after_drop,
                                                                    level)


def _pause_at(cfg: RunConfig, step: int, steps: tuple[int, int], schedule: set[int], stop_at: int | None,
              limit_s: float | None, started: float) -> Paused | None:
    """``Paused`` at checkpoint ``step`` of this call's ``steps`` (from, to) where it is ``stop_at`` or the next one
    lies beyond ``limit_s`` (``_out_of_time``); None at the last step or to go on."""
    start, end = steps
    if step < end and (step == stop_at or (
            limit_s is not None and _out_of_time(step, start, schedule, end, started, limit_s))):
        return Paused(cfg.run_id, step, cfg.train.steps, time.perf_counter() - started)
    return None


def _show(bar, step: int, metrics: tuple[str, ...], latest: torch.Tensor, progress: bool | str) -> None:
    """One step on the progress bar, with the latest losses every ``DISPLAY_EVERY`` steps."""
    if progress and step % DISPLAY_EVERY == 0:
        bar.set_postfix({k: f"{v:.3g}" for k, v in zip(metrics, latest.tolist())}, refresh=False)
    bar.update(1)


def _out_of_time(step: int, start: int, schedule: set[int], end: int, started: float, limit_s: float) -> bool:
    """Whether the checkpoint after ``step`` lies beyond ``limit_s`` seconds since ``started`` at this call's
    pace so far (steps ``start`` to ``step``, setup included); False at the last step."""
    following = min((s for s in schedule if step < s <= end), default=None)
    if following is None:
        return False
    spent = time.perf_counter() - started
    return spent + spent / (step - start) * (following - step) > limit_s


def draw(cfg: RunConfig, generator: torch.Generator) -> Batch:
    """The next training batch from ``generator`` (for a mixture, its size drawn first)."""
    data = cfg.data
    if data.sizes:
        pick = torch.randint(len(data.sizes), (1,), generator=generator, device=generator.device)
        data = data.of_size(data.sizes[int(pick)])
    return sample_batch(data, cfg.train.batch, generator)


def update(model: Model, optimizer: torch.optim.Optimizer, cfg: RunConfig, batch: Batch) -> torch.Tensor:
    """One Adam step on ``batch`` (on the model's device); returns its metrics (``model.metrics`` order, on
    the device, taken from the forward pass of the update)."""
    with autocast(cfg.train.precision, batch.ids.device):
        losses = model.losses(batch)
    optimizer.zero_grad(set_to_none=True)
    losses["L"].backward()
    optimizer.step()
    return torch.stack([losses[k].detach().float() for k in model.metrics])


def train_step(model: Model, optimizer: torch.optim.Optimizer, cfg: RunConfig,
               generator: torch.Generator, device: torch.device) -> torch.Tensor:
    """One online Adam step on a fresh batch; returns its metrics (``model.metrics`` order, on the device)."""
    return update(model, optimizer, cfg, draw(cfg, generator).to(device))


def stepper(engine: Engine | str, model: Model, optimizer: torch.optim.Optimizer, cfg: RunConfig,
            generator: torch.Generator, device: torch.device) -> Callable[[], torch.Tensor]:
    """A function that takes one training step each call (the next batch of ``generator``, one Adam update)
    and returns its metrics on the device, run by ``engine`` (``matcomp.runs.engines``) on a model and optimiser
    that ``init_training`` made for it. Made after any resume state is loaded: the graph engine captures the
    model and optimiser tensors as they are then."""
    name = as_engine(engine).name
    if name == "eager":
        return lambda: train_step(model, optimizer, cfg, generator, device)
    if name == "ahead":
        return lambda: update(model, optimizer, cfg, pinned(draw(cfg, generator), device))
    problem = engine_problem(engine, cfg, device)
    if problem is not None:
        raise ValueError(problem)
    return GraphStep(model, optimizer, lambda batch: update(model, optimizer, cfg, batch),
                     lambda: draw(cfg, generator), draw(cfg, torch.Generator().manual_seed(0)), device)


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
          train_gen: torch.Generator, eval_gen: torch.Generator, step: int, rows: list[dict],
          written: dict[int, str], whole: bool = True) -> None:
    """Checkpoint (its SHA-256 added to ``written``), metrics, then the resume state, which records the run,
    ``written`` and the metrics' SHA-256, so that a resume or the seal checks them first: whatever a crash leaves
    behind, resume.pt never points past the metrics and weights already on disk. ``whole`` False: the checkpoint
    alone (``train(resumable=False)``)."""
    written[step] = folder.write_checkpoint(step, model.state_dict(), cfg)
    if not whole:
        return
    table = folder.write_metrics(pd.DataFrame(rows, columns=columns(cfg)))
    folder.write_resume({"step": step, "elapsed": rows[-1]["time_s"], "model": model.state_dict(),
                         "optimizer": optimizer.state_dict(), "train_gen": train_gen.get_state(),
                         "eval_gen": eval_gen.get_state(), "run": cfg.hash, "checkpoint_sha256": dict(written),
                         "metrics_sha256": table})
