"""Which levers a lent GPU should train with (``python -m matcomp bench --levers``): each candidate engine
(``CANDIDATES``, ``matcomp.runs.engines``) trains the run's config twice from step 0 for the same few hundred
steps, timed, in deterministic mode; a candidate whose two trainings differ by a byte is refused, since the
step-4,000 checkpoint of a run is brought home by a second training that must give the same bytes. The fastest
of the rest, by its projected time for the whole run (setup, e.g. a compilation, plus its steps), is then timed
under each larger cuBLAS workspace (``WORKSPACES``). The workspace is read once per process, when cuBLAS starts,
so every workspace's trials run in a process of their own (``python -m matcomp.levers SPEC``), within one budget
of seconds for them all; a candidate that cannot run here, fails, or finds the budget spent says why.
The last line of ``report`` names the choice as ``python -m matcomp remote`` options (``fastest levers: ...``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from matcomp.config import RunConfig
from matcomp.runs.cost import trial
from matcomp.runs.engines import WORKSPACE, WORKSPACE_ENV, Engine, engine_problem, workspace_problem

CANDIDATES = (Engine("graph"), Engine("graph", compiled=True), Engine("ahead", compiled=True),
              Engine("graph", mask="ones"), Engine("ahead"), Engine("eager"))  # the likeliest fastest first
WORKSPACES = (WORKSPACE, ":16384:8")  # the deterministic mode's, then eight 16 MiB ones (128 MiB in PyTorch's reading)
PREFIX = "timed "  # a child's line of one candidate's result


@dataclass(frozen=True)
class Timed:
    """One candidate under one workspace: its setup and step seconds (the faster of its two trainings) and
    whether the two repeated each other byte for byte, or ``why`` it was not timed."""

    engine: Engine
    workspace: str
    setup_s: float | None = None
    seconds: float | None = None
    repeats: bool | None = None
    why: str = ""

    def projected(self, steps: int) -> float:
        """Seconds to set up and train ``steps`` steps."""
        assert self.setup_s is not None and self.seconds is not None
        return self.setup_s + steps * self.seconds

    def line(self, steps: int, trained: int) -> str:
        name = f"{self.engine} [{self.workspace}]"
        if self.seconds is None:
            return f"  {name:34} not timed: {self.why}"
        figures = (f"{self.seconds:.4f} s/step, setup {self.setup_s:.0f} s, {steps:,} steps in "
                   f"{self.projected(steps):.0f} s")
        if self.repeats:
            return f"  {name:34} {figures}; two trainings of {trained:,} steps equal byte for byte"
        return f"  {name:34} REFUSED: two trainings of {trained:,} steps differ ({figures})"


def choose(timings: list[Timed], steps: int) -> Timed:
    """The timing of ``timings`` that repeats itself and trains ``steps`` steps soonest (ValueError when none
    does, naming why each did not)."""
    good = [t for t in timings if t.seconds is not None and t.repeats]
    if not good:
        raise ValueError("no lever combination both ran and repeated itself byte for byte: "
                         + "; ".join(f"{t.engine} [{t.workspace}]: {t.why or 'differs'}" for t in timings))
    return min(good, key=lambda t: t.projected(steps))


def time_levers(cfg: RunConfig, device: torch.device, steps: int, warmup: int, budget_s: float,
                candidates: tuple[Engine, ...] = CANDIDATES,
                workspaces: tuple[str, ...] = WORKSPACES) -> list[Timed]:
    """Every candidate under the first workspace, then the fastest of them under each other one (module
    docstring), all within ``budget_s`` seconds."""
    deadline = time.perf_counter() + budget_s
    timings = _in_child(cfg, device, workspaces[0], candidates, steps, warmup, deadline)
    for workspace in workspaces[1:]:
        try:
            best: tuple[Engine, ...] = (choose(timings, cfg.train.steps).engine,)
        except ValueError:
            best = ()
        problem = workspace_problem(workspace, device)
        if problem is not None or not best:
            timings += [Timed(engine, workspace, why=problem or "no candidate repeated itself under "
                              f"{workspaces[0]}") for engine in best or candidates[:1]]
            continue
        timings += _in_child(cfg, device, workspace, best, steps, warmup, deadline)
    return timings


def report(timings: list[Timed], cfg: RunConfig, trained: int) -> str:
    """A line per timing and the last, ``fastest levers: OPTIONS`` (``python -m matcomp remote``'s), or ``no
    levers`` and why."""
    lines = [f"levers (each trained twice for {trained:,} steps from step 0, deterministic; projected: setup and "
             f"{cfg.train.steps:,} steps):", *(t.line(cfg.train.steps, trained) for t in timings)]
    try:
        best = choose(timings, cfg.train.steps)
    except ValueError as err:
        return "\n".join([*lines, f"no levers: {err}"])
    return "\n".join([*lines, "fastest levers: " + " ".join([*best.engine.flags(), "--cublas-workspace",
                                                             best.workspace])])


def _in_child(cfg: RunConfig, device: torch.device, workspace: str, candidates: tuple[Engine, ...], steps: int,
              warmup: int, deadline: float) -> list[Timed]:
    """``candidates`` timed by a process of their own whose cuBLAS starts with ``workspace``, stopped at
    ``deadline``; a candidate it did not report says why."""
    left = deadline - time.perf_counter()
    spec = {"config": cfg.to_dict(), "device": str(device), "workspace": workspace, "steps": steps, "warmup": warmup,
            "budget_s": left, "threads": torch.get_num_threads(), "candidates": [asdict(e) for e in candidates]}
    library = str(Path(__file__).resolve().parents[1])  # this library, whatever else is installed
    env = {**os.environ, WORKSPACE_ENV: workspace,
           "PYTHONPATH": os.pathsep.join(filter(None, [library, os.environ.get("PYTHONPATH")]))}
    why = "the bench's budget was spent"
    try:
        done = subprocess.run([sys.executable, "-m", "matcomp.levers", json.dumps(spec)], capture_output=True,
                              text=True, env=env, timeout=max(left, 1))
        out = done.stdout
        if done.returncode:
            why = f"failed: its process exited {done.returncode}: " + (done.stderr.strip().splitlines() or [""])[-1]
    except subprocess.TimeoutExpired as err:
        out = err.stdout.decode() if isinstance(err.stdout, bytes) else err.stdout or ""
    reported = {}
    for line in out.splitlines():
        if line.startswith(PREFIX):
            fields = json.loads(line[len(PREFIX):])
            engine = Engine(**fields.pop("engine"))
            reported[engine] = Timed(engine, **fields)
    return [reported.get(engine) or Timed(engine, workspace, why=why[:300]) for engine in candidates]


def _child(text: str) -> None:
    """Time the candidates of the JSON ``text`` (``_in_child``) and print a line for each as it is done."""
    from matcomp.remote import deterministic

    spec = json.loads(text)
    started = time.perf_counter()
    cfg, device, workspace = RunConfig.from_dict(spec["config"]), torch.device(spec["device"]), spec["workspace"]
    torch.set_num_threads(spec["threads"])
    deterministic(device, workspace)
    for fields in spec["candidates"]:
        engine = Engine(**fields)
        timed = Timed(engine, workspace, why=engine_problem(engine, cfg, device) or "")
        if not timed.why and time.perf_counter() - started > spec["budget_s"]:
            timed = Timed(engine, workspace, why="the bench's budget was spent")
        if not timed.why:
            try:
                first, second = (trial(cfg, device, spec["steps"], spec["warmup"], engine) for _ in range(2))
                if device.type == "cuda":
                    torch.cuda.empty_cache()
                timed = Timed(engine, workspace, first.setup_s, min(first.seconds, second.seconds),
                              first.digest == second.digest)
            except Exception as err:  # a capture or compilation that fails on this machine's software
                timed = Timed(engine, workspace, why=f"failed: {type(err).__name__}: "
                                                     f"{(str(err).splitlines() or [''])[0]}"[:300])
        print(PREFIX + json.dumps(asdict(timed)), flush=True)


if __name__ == "__main__":
    _child(sys.argv[1])
