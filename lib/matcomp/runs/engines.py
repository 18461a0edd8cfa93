"""How a training step runs on its device (``Engine``): the same update on the same batches, by levers that
change only its speed, so a run's numbers do not depend on them beyond rounding (``matcomp.runs.training``
trains with one, ``python -m matcomp bench --levers`` times them on a lent GPU, ``matcomp.remote`` records it).

- ``name`` (``ENGINES``): ``eager`` copies each batch to the device as it is drawn (a copy from pageable memory
  waits for the device: the host and the device take turns); ``ahead`` copies it from pinned memory without
  waiting, so the host draws and launches while the device computes, and steps with fused Adam; ``graph``
  also captures the whole step (forward, backward, Adam) once as a CUDA graph and replays it, so the host
  launches nothing.
- ``compiled``: ``torch.compile`` of the model (default mode), which fuses the fp32 LayerNorm, GELU and
  residual passes between the matrix products; inside the graph engine's capture, its kernels are replayed.
- ``mask`` (``MASKS``): ``none`` gives attention no mask, which is what this library's BERT has always
  trained with (``transformers`` passes SDPA no mask when it is given none); ``ones`` gives it the paper's
  all-ones mask, as the (B, 1, S, S) boolean mask SDPA then reads, to time what reading it costs.

The cuBLAS workspace (``CUBLAS_WORKSPACE_CONFIG``) is a setting of the process, read when cuBLAS starts, so it is
not a lever of the engine: ``matcomp.remote.deterministic`` sets it, and ``record`` writes it into the summary.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass

import torch

from matcomp.config import RunConfig
from matcomp.data import Batch
from matcomp.models.bert import MatrixBert

ENGINES = ("eager", "ahead", "graph")  # each faster than the last on a GPU
MASKS = ("none", "ones")
GRAPH_WARMUP = 3  # steps run (and undone) before a CUDA graph is captured: cuBLAS and Adam set up their state
WORKSPACE_ENV = "CUBLAS_WORKSPACE_CONFIG"
WORKSPACE = ":4096:8"  # the deterministic mode's: eight 4 MiB workspaces (PyTorch reads 32 MiB in all)


@dataclass(frozen=True)
class Engine:
    """One choice of every lever (module docstring); ``Engine()`` is how every run trained before them."""

    name: str = "eager"
    compiled: bool = False
    mask: str = "none"

    def __str__(self) -> str:
        return "+".join([self.name, *(["compile"] if self.compiled else []),
                         *([f"mask {self.mask}"] if self.mask != "none" else [])])

    def flags(self) -> list[str]:
        """The ``python -m matcomp remote`` options that choose this engine."""
        return ["--engine", self.name, *(["--compile"] if self.compiled else []), "--attention-mask", self.mask]


def as_engine(engine: Engine | str) -> Engine:
    """``engine``, or the engine of that name with the other levers at their defaults."""
    return engine if isinstance(engine, Engine) else Engine(engine)


def engine_problem(engine: Engine | str, cfg: RunConfig, device: torch.device) -> str | None:
    """Why ``engine`` cannot train ``cfg`` on ``device``, or None. A CUDA graph replays one fixed step, so it
    needs CUDA, one batch shape (no mixture of sizes), no attention hooks that change by step (the recipe's
    bias and scale) and no bf16 autocast (whose cast cache a replay would reuse); a compiled step would compile
    again for every batch shape and every hooked step; the all-ones mask is the BERT's, for SDPA, unhooked."""
    engine = as_engine(engine)
    if engine.name not in ENGINES:
        return f"engine must be one of {ENGINES}; got {engine.name!r}"
    if engine.mask not in MASKS:
        return f"the attention mask must be one of {MASKS}; got {engine.mask!r}"
    tc = cfg.train
    sizes = ("a mixture of sizes changes the batch's shape (data.sizes)", bool(cfg.data.sizes))
    hooks = ("the recipe's attention hooks change by step (train.attention_bias, train.attention_scale)",
             tc.attention_bias > 0 or tc.attention_scale != 1)
    checks = {
        "the graph engine": [("it needs CUDA", device.type != "cuda"), sizes, hooks,
                             ("bf16 autocast caches its casts (train.precision bf16)", tc.precision == "bf16")]
        if engine.name == "graph" else [],
        "a compiled step": [sizes, hooks] if engine.compiled else [],
        "the all-ones mask": [("it is the BERT's (model.arch gpt attends causally)", cfg.model.arch != "bert"),
                              ("it is given to SDPA (train.attention eager adds its mask)", tc.attention != "sdpa"),
                              hooks] if engine.mask == "ones" else [],
    }
    for lever, reasons in checks.items():
        why = [reason for reason, bad in reasons if bad]
        if why:
            return f"{lever} cannot train {cfg.run_id} on {device}: {'; '.join(why)}"
    return None


def adam(parameters, lr: float, engine: Engine | str = "eager") -> torch.optim.Adam:
    """The paper's Adam (constant lr, no weight decay): PyTorch's default implementation for ``eager``, its
    fused one for the faster engines (kept on the device, capturable in a CUDA graph, for ``graph``)."""
    name = as_engine(engine).name
    if name == "eager":
        return torch.optim.Adam(parameters, lr=lr)
    return torch.optim.Adam(parameters, lr=lr, fused=True, capturable=name == "graph")


def prepare(model: torch.nn.Module, engine: Engine | str) -> None:
    """Apply the model's levers of ``engine`` in place: compile it (its state-dict names unchanged) and give
    its BERT the all-ones mask (``all_ones_mask``)."""
    engine = as_engine(engine)
    if engine.mask == "ones":
        assert isinstance(model, MatrixBert)  # engine_problem refuses the GPT
        model.bert.register_forward_pre_hook(all_ones_mask, with_kwargs=True)
    if engine.compiled:
        model.compile()


def all_ones_mask(module: torch.nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """A forward pre-hook of a ``BertModel`` that gives it the (B, 1, S, S) all-True mask: every position attends
    to every other, as without a mask, but ``transformers`` passes a 4-D mask on as it is, so SDPA reads it."""
    ids = kwargs["input_ids"]
    batch, length = ids.shape
    return args, {**kwargs, "attention_mask": torch.ones(batch, 1, length, length, dtype=torch.bool,
                                                         device=ids.device)}


def pinned(batch: Batch, device: torch.device) -> Batch:
    """``batch`` on ``device``, copied from pinned memory so the host does not wait for the device (PyTorch's
    pinned allocator reuses a buffer only once its copy is done); as it is on a CPU."""
    if device.type != "cuda":
        return batch
    ids, values, observed = (t.pin_memory().to(device, non_blocking=True) for t in (batch.ids, batch.values,
                                                                                     batch.observed))
    return Batch(ids, values, observed)


class GraphStep:
    """The graph engine's step: ``step_on`` (one update on a batch, returning its metrics) captured once as a CUDA
    graph on fixed input buffers, then each call copies ``next_batch()`` into them and replays it. Capturing needs
    a few real steps first (``GRAPH_WARMUP``, on ``example``, a batch of the run's shape drawn from a generator of
    its own); the weights and Adam's state are then put back as they were, in place, so the run's steps are those
    the other engines take."""

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                 step_on: Callable[[Batch], torch.Tensor], next_batch: Callable[[], Batch], example: Batch,
                 device: torch.device):
        self.next_batch = next_batch
        self.inputs = example.to(device)
        weights = [p.detach().clone() for p in model.parameters()]
        moments = {p: {k: v.clone() for k, v in state.items()} for p, state in optimizer.state.items()}
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(GRAPH_WARMUP):
                step_on(self.inputs)
        torch.cuda.current_stream(device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.metrics = step_on(self.inputs)
        with torch.no_grad():  # undo the warm-up: every tensor the graph reads or writes keeps its address
            for parameter, weight in zip(model.parameters(), weights):
                parameter.copy_(weight)
            for key, state in optimizer.state.items():
                for name, value in state.items():
                    value.copy_(moments[key][name]) if key in moments else value.zero_()  # fresh Adam: all zeros

    def __call__(self) -> torch.Tensor:
        batch = self.next_batch()
        for buffer, values in zip((self.inputs.ids, self.inputs.values, self.inputs.observed),
                                  (batch.ids, batch.values, batch.observed)):
            buffer.copy_(values.pin_memory(), non_blocking=True)
        self.graph.replay()
        return self.metrics.clone()


def workspace_problem(workspace: str, device: torch.device) -> str | None:
    """Why ``workspace`` cannot be the cuBLAS workspace configuration of training on ``device``, or None: it must
    read ``:KiB:COUNT`` (repeatable, as cuBLAS reads it), and another than ``WORKSPACE`` needs CUDA."""
    if not re.fullmatch(r"(:[1-9][0-9]*:[1-9][0-9]*)+", workspace):
        return f"the cuBLAS workspace configuration must read :KiB:COUNT, e.g. {WORKSPACE}; got {workspace!r}"
    if workspace != WORKSPACE and device.type != "cuda":
        return f"the cuBLAS workspace {workspace} is a CUDA setting; on {device} leave it at {WORKSPACE}"
    return None


def record(engine: Engine | str, device: torch.device) -> dict[str, object]:
    """What a run's summary says of how it trained: the engine's name, its levers away from their defaults and, on
    CUDA, the cuBLAS workspace configuration this process runs with (the deterministic mode's unless set)."""
    engine = as_engine(engine)
    return {"engine": engine.name, **({"compiled": True} if engine.compiled else {}),
            **({"attention_mask": engine.mask} if engine.mask != "none" else {}),
            **({"cublas_workspace": os.environ.get(WORKSPACE_ENV)} if device.type == "cuda" else {})}
