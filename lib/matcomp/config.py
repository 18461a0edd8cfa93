"""Frozen, validated run configuration (NeurIPS §2.2, App. D).

A run is fully described by a ``RunConfig`` made of three parts: ``DataConfig`` (what matrices
and masks are sampled), ``ModelConfig`` (the BERT's shape) and ``TrainConfig`` (the optimiser and
the bookkeeping). Every bad value raises ``ValueError`` naming the field and the allowed range;
unknown keys are rejected when a config is read back from a dict or JSON. The config's ``hash``
(everything but the human-readable ``name``) identifies the run on disk.

>>> cfg = RunConfig()
>>> cfg.model.intermediate_size, cfg.data.seq_len
(3072, 49)
>>> cfg.override({"train.lr": "3e-4"}).train.lr
0.0003
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import typing
from dataclasses import dataclass, field

from matcomp.drop import SMOOTHING
from matcomp.overrides import parse_value
from matcomp.paper import PAPER_CHECKPOINT_STEPS
from matcomp.seeding import MAX_SEED
from matcomp.tokenizer import VALUE_MAX

DISTRIBUTIONS = ("uniform", "gaussian", "laplace")
PRECISIONS = ("fp32", "bf16", "tf32")
ATTENTIONS = ("sdpa", "eager")
POSITION_INITS = ("bert", "grid")
ARCHS = ("bert", "gpt")
COMPONENTS = ("all", "attention", "mlp", "position", "token")
BIAS_SCHEDULES = ("fade", "constant")


def _require(ok: bool, name: str, allowed: str, value) -> None:
    if not ok:
        raise ValueError(f"{name} must be {allowed}; got {value!r}")


def _check_types(obj, prefix: str) -> None:
    """Reject values whose type does not match the annotation (bool is not an int here)."""
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        value, kind = getattr(obj, f.name), hints[f.name]
        name = f"{prefix}.{f.name}"
        if kind is float:
            _require(isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value), name,
                     "a finite number", value)
            object.__setattr__(obj, f.name, float(value))  # 1 and 1.0 must hash alike
        elif kind is int:
            _require(isinstance(value, int) and not isinstance(value, bool), name, "an integer", value)
        elif kind is bool:
            _require(isinstance(value, bool), name, "true or false", value)
        elif kind is str:
            _require(isinstance(value, str), name, "a string", value)
        elif typing.get_origin(kind) is tuple:  # a list field: a scalar is not a list of one
            _require(isinstance(value, (list, tuple)), name, "a list of integers in brackets, e.g. [1, 2]", value)


@dataclass(frozen=True)
class DataConfig:
    """The matrices X = U Vᵀ (m × n, rank r) and the random masks (NeurIPS §2.1).

    ``scale`` is the half-width of the uniform factor distribution, or the standard deviation
    (gaussian) / scale (laplace) of the others. ``clamp`` clips values to the vocabulary's
    [-10, 10]; it is required for unbounded factor distributions so that no batch can crash.
    ``sizes`` (App. I), if given, makes training a mixture of square sizes: every step draws one n
    from it uniformly and the whole batch is n × n; n_rows and n_cols must then both be its
    largest entry (the sequence length and the size analyses use by default).
    """

    n_rows: int = 7
    n_cols: int = 7
    rank: int = 2
    p_mask: float = 0.3
    distribution: str = "uniform"
    scale: float = 1.0
    clamp: bool = False
    sizes: tuple[int, ...] = ()

    def __post_init__(self):
        _check_types(self, "data")
        object.__setattr__(self, "sizes", tuple(self.sizes))
        _require(all(isinstance(n, int) and not isinstance(n, bool) and self.rank <= n <= 64 for n in self.sizes)
                 and len(set(self.sizes)) == len(self.sizes), "data.sizes",
                 f"distinct integers in [data.rank, 64] = [{self.rank}, 64]", self.sizes)
        _require(not self.sizes or self.n_rows == self.n_cols == max(self.sizes), "data.n_rows and data.n_cols",
                 f"both equal to max(data.sizes) = {max(self.sizes, default=0)}", (self.n_rows, self.n_cols))
        _require(1 <= self.n_rows <= 64, "data.n_rows", "in [1, 64]", self.n_rows)
        _require(1 <= self.n_cols <= 64, "data.n_cols", "in [1, 64]", self.n_cols)
        _require(1 <= self.rank <= min(self.n_rows, self.n_cols), "data.rank",
                 f"in [1, min(n_rows, n_cols)] = [1, {min(self.n_rows, self.n_cols)}]", self.rank)
        _require(0 < self.p_mask < 1, "data.p_mask",
                 "in (0, 1): 0 leaves no entry missing, so no L_mask; 1 leaves nothing to complete from", self.p_mask)
        _require(self.distribution in DISTRIBUTIONS, "data.distribution", f"one of {DISTRIBUTIONS}",
                 self.distribution)
        _require(self.scale > 0, "data.scale", "> 0", self.scale)
        if self.distribution == "uniform":
            # |X_ij| <= rank * scale**2: every value must have a token unless clamping is asked for.
            bound = self.rank * self.scale ** 2
            _require(self.clamp or bound <= VALUE_MAX, "data.rank * data.scale**2",
                     f"<= {VALUE_MAX} (the vocabulary's range) unless data.clamp is true", bound)
        else:
            _require(self.clamp, "data.clamp", f"true for the unbounded '{self.distribution}' factors",
                     self.clamp)

    @property
    def seq_len(self) -> int:
        return self.n_rows * self.n_cols

    def of_size(self, n: int) -> DataConfig:
        """The same task on n × n matrices alone (one member of a size mixture)."""
        return dataclasses.replace(self, n_rows=n, n_cols=n, sizes=())


@dataclass(frozen=True)
class ModelConfig:
    """The BERT encoder (NeurIPS §2.2, App. D), or with ``arch`` "gpt" the autoregressive GPT-2 of
    App. G (``matcomp.models.gpt``). ``intermediate`` 0 means 4 · hidden."""

    hidden: int = 768
    layers: int = 4
    heads: int = 8
    intermediate: int = 0
    max_positions: int = 512
    arch: str = "bert"

    def __post_init__(self):
        _check_types(self, "model")
        _require(self.arch in ARCHS, "model.arch", f"one of {ARCHS}", self.arch)
        _require(self.hidden >= 1, "model.hidden", ">= 1", self.hidden)
        _require(self.layers >= 1, "model.layers", ">= 1", self.layers)
        _require(self.heads >= 1, "model.heads", ">= 1", self.heads)
        _require(self.hidden % self.heads == 0, "model.hidden", f"divisible by model.heads = {self.heads}",
                 self.hidden)
        _require(self.intermediate >= 0, "model.intermediate", ">= 0 (0 means 4 * hidden)", self.intermediate)
        _require(self.max_positions >= 1, "model.max_positions", ">= 1", self.max_positions)

    @property
    def intermediate_size(self) -> int:
        return self.intermediate or 4 * self.hidden

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


@dataclass(frozen=True)
class TrainConfig:
    """Online Adam training (NeurIPS §2.2, App. D).

    Checkpoints are saved at step 0, every ``checkpoint_every`` steps, at the extra
    ``checkpoint_steps`` and at the last step; "step s" means after s updates.

    ``stop_after_drop`` s > 0 ends a run s steps after its drop step (``matcomp.drop.detect_drop``, checked at
    every checkpoint; a run that starts below half the copying level, with no plateau, ``s`` steps after
    step 550) instead of at ``steps``, which stays the budget: a run that never drops trains it all.
    The drop step is the same as if the run had gone on, so a table of drop steps costs only the steps up
    to each drop, and no run is censored before its budget.

    The fields from ``position_init`` on change the paper's recipe (the training-dynamics chapters,
    ``matcomp.models.recipe``): ``position_init`` "grid" starts position (i, j) at r_i + c_j;
    ``attention_bias`` b > 0 adds b · (1 - (s-1)/``attention_bias_steps``) to the attention score of
    every same-row or same-column pair at step s until the bias reaches 0 (``attention_bias_schedule``
    "fade"), or b at every step ("constant", ``attention_bias_steps`` 0); ``attention_scale`` c ≠ 1
    multiplies the attention probabilities of those pairs by c from step ``attention_scale_from`` to the
    end (the follow-up's intervention, Gopalani & Hu 2025); ``attention_diagonal`` False leaves each
    position's own pair out of both; ``component`` other than
    "all" trains only that group of parameters, starting from the final weights of the run
    ``init_from`` (a run id) with the group (``matcomp.models.recipe``) re-initialised. ``init_nudge`` k > 0
    moves the k-th scalar of the initial weights (counting from 1 over the model's parameters in order) up by
    one unit in the last place: a change at the level of floating-point rounding, to measure how far one seed's
    drop step moves under it (``matcomp.analysis.drop_spread``).

    ``precision``: "fp32"; "bf16" runs the forward pass under bf16 autocast; "tf32" keeps fp32 weights,
    Adam and losses but lets CUDA matrix products round their inputs to TF32 on the tensor cores (what
    PyTorch did by default on Ampere GPUs before 1.12); on a CPU it is fp32.
    """

    steps: int = 50000
    batch: int = 256
    lr: float = 1e-4
    seed: int = 0
    eval_every: int = 100
    eval_batch: int = 64
    checkpoint_every: int = 1000
    checkpoint_steps: tuple[int, ...] = PAPER_CHECKPOINT_STEPS
    stop_after_drop: int = 0
    precision: str = "fp32"
    attention: str = "sdpa"
    position_init: str = "bert"
    attention_bias: float = 0.0
    attention_bias_steps: int = 0
    attention_bias_schedule: str = "fade"
    attention_scale: float = 1.0
    attention_scale_from: int = 1
    attention_diagonal: bool = True
    component: str = "all"
    init_from: str = ""
    init_nudge: int = 0

    def __post_init__(self):
        _check_types(self, "train")
        _require(self.steps >= 1, "train.steps", ">= 1", self.steps)
        _require(self.batch >= 1, "train.batch", ">= 1", self.batch)
        _require(0 < self.lr <= 1, "train.lr", "in (0, 1]", self.lr)
        _require(0 <= self.seed <= MAX_SEED, "train.seed",
                 f"in [0, {MAX_SEED}] (its data streams are seed * 1000 + 1 to 3, 64-bit generator seeds)", self.seed)
        _require(self.eval_every >= 1, "train.eval_every", ">= 1", self.eval_every)
        _require(self.eval_batch >= 1, "train.eval_batch", ">= 1", self.eval_batch)
        _require(self.checkpoint_every >= 1, "train.checkpoint_every", ">= 1", self.checkpoint_every)
        object.__setattr__(self, "checkpoint_steps", tuple(self.checkpoint_steps))
        _require(all(isinstance(s, int) and s >= 0 for s in self.checkpoint_steps), "train.checkpoint_steps",
                 "a list of integers >= 0", self.checkpoint_steps)
        _require(self.stop_after_drop == 0 or self.stop_after_drop > SMOOTHING // 2, "train.stop_after_drop",
                 f"0 (train every step) or > {SMOOTHING // 2} (the drop step is read from a {SMOOTHING}-step centred "
                 f"mean)",
                 self.stop_after_drop)
        _require(self.precision in PRECISIONS, "train.precision", f"one of {PRECISIONS}", self.precision)
        _require(self.attention in ATTENTIONS, "train.attention", f"one of {ATTENTIONS}", self.attention)
        _require(self.position_init in POSITION_INITS, "train.position_init", f"one of {POSITION_INITS}",
                 self.position_init)
        _require(self.attention_bias >= 0, "train.attention_bias", ">= 0", self.attention_bias)
        _require(self.attention_bias_steps >= 0, "train.attention_bias_steps", ">= 0", self.attention_bias_steps)
        _require(self.attention_bias_schedule in BIAS_SCHEDULES, "train.attention_bias_schedule",
                 f"one of {BIAS_SCHEDULES}", self.attention_bias_schedule)
        if self.attention_bias_schedule == "fade":
            _require(self.attention_bias == 0 or self.attention_bias_steps >= 1, "train.attention_bias_steps",
                     ">= 1 when train.attention_bias > 0 fades", self.attention_bias_steps)
        else:
            _require(self.attention_bias_steps == 0, "train.attention_bias_steps",
                     "0 when train.attention_bias_schedule is 'constant' (the bias is never withdrawn)",
                     self.attention_bias_steps)
        _require(self.attention_scale > 0, "train.attention_scale", "> 0", self.attention_scale)
        _require(self.attention_scale_from >= 1, "train.attention_scale_from", ">= 1 (an update step)",
                 self.attention_scale_from)
        _require(self.component in COMPONENTS, "train.component", f"one of {COMPONENTS}", self.component)
        _require((self.component == "all") == (self.init_from == ""), "train.init_from",
                 "a run id exactly when train.component is not 'all'", self.init_from)
        _require(self.init_nudge >= 0, "train.init_nudge", ">= 0 (0: no weight moved)", self.init_nudge)

    @property
    def checkpoint_schedule(self) -> tuple[int, ...]:
        """Every step at which a checkpoint is written, sorted."""
        steps = set(range(0, self.steps + 1, self.checkpoint_every)) | {self.steps}
        steps |= {s for s in self.checkpoint_steps if s <= self.steps}
        return tuple(sorted(steps))


@dataclass(frozen=True)
class RunConfig:
    """One training run. ``name`` labels the run folder and is not part of its identity."""

    name: str = "custom"
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self):
        _require(isinstance(self.name, str) and self.name.replace("-", "").replace("_", "").isalnum(),
                 "name", "letters, digits, '-' or '_'", self.name)
        if self.model.arch == "gpt":
            self._check_gpt()
        else:
            _require(self.data.seq_len <= self.model.max_positions, "data.n_rows * data.n_cols",
                     f"<= model.max_positions = {self.model.max_positions}", self.data.seq_len)

    def _check_gpt(self) -> None:
        """What the GPT of App. G supports: one size of uniform matrices inside its [-2, 2] tokens,
        trained as a whole from scratch."""
        d, t = self.data, self.train
        _require(2 * d.seq_len <= self.model.max_positions, "2 * data.n_rows * data.n_cols",
                 f"<= model.max_positions = {self.model.max_positions} for model.arch 'gpt'", 2 * d.seq_len)
        _require(d.distribution == "uniform" and not d.clamp and d.rank * d.scale ** 2 <= 2, "data",
                 "uniform factors with rank * scale**2 <= 2 (the GPT's tokens cover [-2, 2]) for model.arch 'gpt'",
                 f"{d.distribution}, rank {d.rank}, scale {d.scale}, clamp {d.clamp}")
        _require(not d.sizes, "data.sizes", "empty for model.arch 'gpt'", d.sizes)
        changed = [k for k, v in LATER_FIELDS["train"].items() if getattr(t, k) != v]
        _require(not changed, "train." + (changed or ["component"])[0], "left at its default for model.arch 'gpt'",
                 [getattr(t, k) for k in changed])

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict) -> RunConfig:
        d = dict(d)
        parts = {"data": DataConfig, "model": ModelConfig, "train": TrainConfig}
        unknown = set(d) - set(parts) - {"name"}
        if unknown:
            raise ValueError(f"unknown config keys {sorted(unknown)}; allowed: name, data, model, train")
        for key, kind in parts.items():
            sub = d.get(key, {})
            allowed = {f.name for f in dataclasses.fields(kind)}
            bad = set(sub) - allowed
            if bad:
                raise ValueError(f"unknown config keys {[f'{key}.{b}' for b in sorted(bad)]}; "
                                 f"allowed: {sorted(allowed)}")
            d[key] = kind(**sub)
        return cls(**d)

    @classmethod
    def from_json(cls, text: str) -> RunConfig:
        return cls.from_dict(json.loads(text))

    @property
    def hash(self) -> str:
        """A stable 10-hex-digit digest of everything that changes the run (not ``name``).

        Fields added after the first runs were shipped count only when they differ from their
        default, so every earlier run keeps its id."""
        d = self.to_dict()
        d.pop("name")
        for part, defaults in LATER_FIELDS.items():
            for key, default in defaults.items():
                if d[part][key] == default:
                    del d[part][key]
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:10]

    @property
    def run_id(self) -> str:
        return f"{self.name}-{self.hash}"

    def override(self, assignments: dict[str, object]) -> RunConfig:
        """A copy with dotted fields replaced, e.g. ``{"train.lr": "3e-4", "name": "x"}``.

        String values are parsed as JSON where possible (so ``"3e-4"`` becomes a float and
        ``"[1000, 2000]"`` a list), otherwise kept as strings.
        """
        d = self.to_dict()
        for key, raw in assignments.items():
            if not isinstance(key, str):
                raise ValueError(f"an override's key must be a dotted field such as 'train.lr'; got {key!r}")
            value = parse_value(raw) if isinstance(raw, str) else raw
            *path, leaf = key.split(".")
            target = d
            for part in path:
                if part not in target or not isinstance(target[part], dict):
                    raise ValueError(f"unknown config key {key!r}")
                target = target[part]
            if leaf not in target:
                raise ValueError(f"unknown config key {key!r}")
            if isinstance(target[leaf], dict):  # a whole section would silently reset every field it leaves out
                raise ValueError(f"{key!r} is a section of the config, not a field: set its fields one by one, "
                                 f"e.g. {key}.{next(iter(target[leaf]))}=...; its fields: {', '.join(target[leaf])}")
            target[leaf] = value
        return RunConfig.from_dict(d)


# fields added after the first runs were shipped: counted in a run's hash only away from their defaults
LATER: dict[str, tuple[type, tuple[str, ...]]] = {
    "data": (DataConfig, ("sizes",)), "model": (ModelConfig, ("arch",)),
    "train": (TrainConfig, ("position_init", "attention_bias", "attention_bias_steps", "attention_bias_schedule",
                            "attention_scale", "attention_scale_from", "attention_diagonal", "component", "init_from",
                            "stop_after_drop", "init_nudge"))}
LATER_FIELDS: dict[str, dict[str, object]] = {  # their defaults, as the dataclasses declare them
    part: {name: {f.name: f.default for f in dataclasses.fields(kind)}[name] for name in names}
    for part, (kind, names) in LATER.items()}
