"""Training many runs at once on Ray: on this machine (an embedded local instance), on one
multi-GPU node or on a cluster (``address``, or ``$RAY_ADDRESS``).

Each run is one Ray task that asks for ``threads_per_run`` CPUs and, where GPUs exist,
``gpus_per_run`` of them (Ray sets ``CUDA_VISIBLE_DEVICES``, so a run gets a GPU of its own). The
task trains through ``get_or_train``: the store's file lock and exact resume keep a re-submitted,
preempted or duplicated run from training twice or diverging. A component run (``train.init_from``)
waits for the run it starts from. A failed run is retried once (``retries``), then reported by
name with its error after the others have finished. Ray is imported only here, and only when
called, so nothing else in the package pays for it.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from matcomp.config import RunConfig

ENV_ADDRESS = "RAY_ADDRESS"


@dataclass(frozen=True)
class Outcome:
    """How one run of a ``train_all`` ended: its id, and the error that stopped it (None if none)."""

    run_id: str
    error: str | None = None
    seconds: float = 0.0


def _train(cfg_json: str, root: str, threads: int, *parents: str) -> tuple[str, float]:
    """The Ray task: one run, trained (or loaded, or resumed) into the store at ``root``."""
    import torch

    from matcomp.runs.store import get_or_train

    torch.set_num_threads(threads)
    device = "cuda" if torch.cuda.is_available() else "cpu"  # Ray shows a task only the GPUs it was given
    started = time.perf_counter()
    run = get_or_train(RunConfig.from_json(cfg_json), device=device, progress=False, root=root)
    return run.config.run_id, time.perf_counter() - started


def _sees(root: str) -> str | None:
    """The Ray task that checks a worker sees the run store: None, or what is wrong."""
    path = Path(root)
    if not path.is_dir():
        return f"{os.uname().nodename} has no folder {root}"
    if not os.access(path, os.W_OK):
        return f"{os.uname().nodename} cannot write to {root}"
    return None


def start_ray(address: str | None = None, num_cpus: int | None = None):
    """Connect to the cluster at ``address`` (or ``$RAY_ADDRESS``), else start an embedded local
    instance with ``num_cpus`` CPUs (default: all); returns the ``ray`` module."""
    import ray

    if not ray.is_initialized():
        address = address or os.environ.get(ENV_ADDRESS)
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    return ray


def check_resources(address: str | None = None, gpus_per_run: float | None = None, timeout_s: float = 5.0) -> None:
    """Before Ray starts, a ValueError for what it would wait on forever: GPUs per run that this machine
    does not have (a local instance), or a cluster address (``address``, else ``$RAY_ADDRESS``) where
    nothing answers within ``timeout_s``."""
    import torch

    address = address or os.environ.get(ENV_ADDRESS)
    if not address:
        count = torch.cuda.device_count()
        if gpus_per_run and gpus_per_run > count:
            raise ValueError(f"--gpus-per-run {gpus_per_run:g}: this machine has {count} CUDA device(s), so no run "
                             f"could start; leave it out (0 here) or give a cluster with --address")
        return
    host, _, port = address.split("://", 1)[-1].rpartition(":")
    if not host or not port.isdigit():
        return  # "auto" and the like: Ray's own lookup
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except (OSError, ValueError) as err:
        raise ValueError(f"no Ray cluster answers at {address!r} ({getattr(err, 'strerror', None) or err}); "
                         f"start one (ray start --head) or leave --address out for one on this machine") from None


def check_store(ray, root: Path) -> None:
    """ValueError unless every node of the cluster sees the run store ``root`` (a shared path)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    sees = ray.remote(num_cpus=0)(_sees)
    nodes = [n["NodeID"] for n in ray.nodes() if n.get("Alive")]
    problems = ray.get([sees.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False))
                        .remote(str(root)) for node in nodes])
    problems = [p for p in problems if p]
    if problems:
        raise ValueError(f"the run store {root} must be a folder every Ray node can write to (set MATCOMP_RUNS to a "
                         f"shared path): " + "; ".join(problems))


def train_all(configs: list[RunConfig], root: Path, *, address: str | None = None, threads_per_run: int = 1,
              gpus_per_run: float | None = None, retries: int = 1, num_cpus: int | None = None,
              report: Callable[[Outcome, int, int], None] | None = None) -> list[Outcome]:
    """Train every run of ``configs`` (each once, in parallel) into the store at ``root``; returns one
    ``Outcome`` per run in the order of ``configs``. ``report(outcome, finished, total)`` is called as
    each run ends. ``gpus_per_run`` None: 1 where CUDA is present here, else 0."""
    import torch

    ray = start_ray(address, num_cpus)
    root = Path(root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    check_store(ray, root)
    if gpus_per_run is None:
        gpus_per_run = 1 if torch.cuda.is_available() else 0
    task = ray.remote(_train).options(num_cpus=threads_per_run, num_gpus=gpus_per_run, max_retries=retries,
                                      retry_exceptions=True)
    refs: dict[str, object] = {}
    ids = {cfg.run_id for cfg in configs}
    for cfg in configs:  # parents come first in a plan; a parent outside the batch must exist already
        parents = [refs[cfg.train.init_from]] if cfg.train.init_from in ids else []
        refs[cfg.run_id] = task.remote(cfg.to_json(), str(root), threads_per_run, *parents)
    by_ref = {ref: run_id for run_id, ref in refs.items()}
    outcomes: dict[str, Outcome] = {}
    pending = list(refs.values())
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        run_id = by_ref[ready[0]]
        try:
            _, seconds = ray.get(ready[0])
            outcome = Outcome(run_id, None, seconds)
        except Exception as err:  # a run's failure is reported, never raised past the others
            outcome = Outcome(run_id, _first_line(err))
        outcomes[run_id] = outcome
        if report is not None:
            report(outcome, len(outcomes), len(refs))
    return [outcomes[cfg.run_id] for cfg in configs]


def _first_line(err: Exception) -> str:
    """The root cause of a task's error, in one line (Ray wraps it in its own traceback)."""
    cause = getattr(err, "cause", None) or err
    return f"{type(cause).__name__}: {str(cause).strip().splitlines()[-1] if str(cause).strip() else ''}"
