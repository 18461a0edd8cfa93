"""Named run configurations, and which one a command or a chapter means: ``preset_name`` and ``resolved_config``
resolve ``$MATCOMP_PRESET``, ``$MATCOMP_SET`` and ``$MATCOMP_SEED`` (the sizes of the chapters' experiments at
each preset are ``matcomp.sizes``).
``benchmarks/presets.md`` holds the measurements behind the CPU ones.

- ``paper``:   the paper's main run, exactly (4 layers, 8 heads, hidden 768, 7×7 rank 2, lr 1e-4,
               batch 256, 50,000 steps). For GPUs: ~13 s/step in fp32 on a 2-core CPU.
- ``paper12``: the 12-layer, 12-head model of the probing experiments (lr 5e-5).
- ``cpu``:     the book's default: 4×4 rank-1 matrices, a 0.3 M-parameter BERT (hidden 64, 4 layers,
               4 heads), batch 128, lr 1e-3. Copying plateau at r/9, drop near step 5,000 (~5 min on
               2 cores); 20,000 steps with a checkpoint every 250.
- ``cpu7x7``:  the model the chapters that analyse one trained model read at the ``cpu`` scale: the
               ``cpu`` model with the paper's 8 heads on its 7×7 matrices at rank 1 (49 positions, 7
               columns; App. I's task) at twice its lr (2e-3; at 1e-3 no 7×7 run left its plateau in
               36,000 steps), ending 12,000 steps after the drop. Found by the searches in
               ``benchmarks/presets.md`` (4 heads stall 4.4× below the plateau; 8 heads go on).
- ``cpu5x5``:  the same recipe on 5×5 rank-1 matrices at lr 1e-3: the smaller task the search saw
               drop first, kept as a preset for comparison.
- ``smoke``:   a tiny run for CI that exercises every code path in seconds (it does not drop).
- ``paper_gpt``, ``cpu_gpt``, ``smoke_gpt``: the autoregressive GPT of App. G at the paper's size
               (7×7 rank 2, hidden 256, 2 layers, 2 heads, lr 1e-4, batch 256)
               and at the CPU and CI scales of the BERT presets' task.
"""

from __future__ import annotations

import os

from matcomp.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from matcomp.overrides import parse_overrides

ENV_PRESET, ENV_SEED, ENV_SET = "MATCOMP_PRESET", "MATCOMP_SEED", "MATCOMP_SET"
DEFAULT_PRESET = "cpu"

PAPER = RunConfig(
    name="paper",
    data=DataConfig(n_rows=7, n_cols=7, rank=2, p_mask=0.3),
    model=ModelConfig(hidden=768, layers=4, heads=8, intermediate=3072),
    train=TrainConfig(steps=50000, batch=256, lr=1e-4, eval_every=100, eval_batch=64, checkpoint_every=1000),
)

PAPER12 = RunConfig(
    name="paper12",
    data=PAPER.data,
    model=ModelConfig(hidden=768, layers=12, heads=12, intermediate=3072),
    train=TrainConfig(steps=50000, batch=256, lr=5e-5, eval_every=100, eval_batch=64, checkpoint_every=1000),
)

CPU = RunConfig(
    name="cpu",
    data=DataConfig(n_rows=4, n_cols=4, rank=1, p_mask=0.3),
    model=ModelConfig(hidden=64, layers=4, heads=4),
    train=TrainConfig(steps=20000, batch=128, lr=1e-3, eval_every=100, eval_batch=64, checkpoint_every=250,
                      checkpoint_steps=()),
)

# the one-model chapters' larger runs: the ``cpu`` preset with the fields their shipping commands ``--set``
CPU5X5 = CPU.override({"name": "cpu5x5", "data.n_rows": 5, "data.n_cols": 5, "train.steps": 30000,
                       "train.stop_after_drop": 10000})
CPU7X7 = CPU.override({"name": "cpu7x7", "data.n_rows": 7, "data.n_cols": 7, "model.heads": 8, "train.lr": 2e-3,
                       "train.steps": 60000, "train.checkpoint_every": 1000, "train.stop_after_drop": 12000})

# the cpu task on a model and batch small enough that a step costs half of hidden 32 and batch 64's (4.9 against
# 9.6 ms on one thread, nearly all of it Python): the tests train about 50 of these runs
SMOKE = CPU.override({"name": "smoke", "model.hidden": 16, "model.layers": 2, "model.heads": 2,
                     "train.steps": 300, "train.batch": 32, "train.eval_every": 50, "train.eval_batch": 32,
                     "train.checkpoint_every": 100})

def gpt_preset(base: RunConfig, hidden: int, steps: int, eval_every: int, checkpoint_every: int,
               early_checkpoints: int = 0) -> RunConfig:
    """App. G's GPT (2 layers, 2 heads) on ``base``'s task with its batch, lr and eval batch; a
    checkpoint every ``early_checkpoints`` steps up to 1,000 too, where Fig. 12 reads the copy being
    learnt, so that a long run need not keep dense checkpoints all the way."""
    t = base.train
    early = tuple(range(early_checkpoints, 1000, early_checkpoints)) if early_checkpoints else ()
    return RunConfig(
        name=f"{base.name}_gpt",
        data=base.data,
        model=ModelConfig(hidden=hidden, layers=2, heads=2, max_positions=2 * base.data.seq_len + 1, arch="gpt"),
        train=TrainConfig(steps=steps, batch=t.batch, lr=t.lr, eval_every=eval_every, eval_batch=t.eval_batch,
                          checkpoint_every=checkpoint_every, checkpoint_steps=early),
    )


# the authors train their GPT 100,000 steps (``configs/gpt.yaml``); ``cpu_gpt`` trains 20,000 (2,000 stopped
# mid-rise), where its accuracy at missing entries is nearly, not quite, flat by the gpt chapter's ``late_gain``
PAPER_GPT = gpt_preset(PAPER, hidden=256, steps=100000, eval_every=100, checkpoint_every=1000, early_checkpoints=100)
CPU_GPT = gpt_preset(CPU, hidden=64, steps=20000, eval_every=25, checkpoint_every=1000, early_checkpoints=50)
SMOKE_GPT = gpt_preset(SMOKE, hidden=32, steps=200, eval_every=25, checkpoint_every=100)

PRESETS: dict[str, RunConfig] = {c.name: c for c in (SMOKE, CPU, CPU5X5, CPU7X7, PAPER, PAPER12,
                                                      SMOKE_GPT, CPU_GPT, PAPER_GPT)}


def preset_config(name: str, overrides: dict[str, object] | None = None) -> RunConfig:
    """The preset ``name``, with dotted ``overrides`` applied (see ``RunConfig.override``)."""
    if not isinstance(name, str) or name not in PRESETS:
        raise ValueError(f"preset must be one of {sorted(PRESETS)}; got {name!r}")
    if overrides is not None and not isinstance(overrides, dict):
        raise TypeError(f"preset_config: overrides must be a dict of dotted fields, e.g. {{'train.lr': 1e-3}}; got "
                        f"{type(overrides).__name__} {overrides!r} (matcomp.overrides.parse_overrides reads such text)")
    return PRESETS[name].override(overrides or {})


def preset_name(name: str | None = None) -> str:
    """The preset meant: ``name``, else ``$MATCOMP_PRESET``, else ``cpu``; an unknown name is a ValueError naming
    where it came from."""
    chosen = name or os.environ.get(ENV_PRESET) or DEFAULT_PRESET
    if chosen not in PRESETS:
        source = "preset" if name else f"${ENV_PRESET}"
        raise ValueError(f"{source} must be one of {sorted(PRESETS)}; got {chosen!r}")
    return chosen


def _environment_overrides(name: str) -> dict[str, object]:
    """The changes ``$MATCOMP_SET`` then ``$MATCOMP_SEED`` make to preset ``name``, checked against it
    so that a bad value is a ValueError naming its variable (explicit changes override both)."""
    changes: dict[str, object] = {}
    for variable in (ENV_SET, ENV_SEED):
        text = os.environ.get(variable, "").strip()
        if not text:
            continue
        try:
            step = parse_overrides(text) if variable == ENV_SET else {"train.seed": text}
            preset_config(name, {**changes, **step})
        except ValueError as err:
            raise ValueError(f"${variable}: {err}") from None
        changes.update(step)
    return changes


def resolved_config(name: str | None = None, overrides: dict[str, object] | None = None) -> RunConfig:
    """The run config a command or a chapter means by preset ``name`` (``preset_name``): the preset, after
    ``$MATCOMP_SET``, ``$MATCOMP_SEED`` and then ``overrides``."""
    chosen = preset_name(name)
    return preset_config(chosen, {**_environment_overrides(chosen), **(overrides or {})})
