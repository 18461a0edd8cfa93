"""Named run configurations, and the sizes of the chapters' experiments at each.
``benchmarks/presets.md`` holds the measurements behind the CPU ones.

- ``paper``:   the paper's main run, exactly (4 layers, 8 heads, hidden 768, 7×7 rank 2, lr 1e-4,
               batch 256, 50,000 steps). For GPUs: ~13 s/step in fp32 on a 2-core CPU.
- ``paper12``: the 12-layer, 12-head model of the probing experiments (lr 5e-5).
- ``cpu``:     the book's default: 4×4 rank-1 matrices, a 0.3 M-parameter BERT (hidden 64, 4 layers,
               4 heads), batch 128, lr 1e-3. Copying plateau at r/9, drop near step 5,000 (~5 min on
               2 cores); 20,000 steps with a checkpoint every 250.
- ``cpu7x7``:  the model the chapters that analyse one trained model read at the ``cpu`` scale: the
               ``cpu`` model on the paper's 7×7 matrices at rank 1 (49 positions, 7 columns; App. I's
               task) at twice its lr (2e-3; at 1e-3 no 7×7 run left its plateau in 36,000 steps),
               ending 12,000 steps after the drop. Found by the search in ``benchmarks/presets.md``.
- ``cpu5x5``:  the same recipe on 5×5 rank-1 matrices at lr 1e-3: the smaller task the search saw
               drop first, kept as a preset for comparison.
- ``smoke``:   a tiny run for CI that exercises every code path in seconds (it does not drop).
- ``paper_gpt``, ``cpu_gpt``, ``smoke_gpt``: the autoregressive GPT of App. G at the paper's size
               (7×7 rank 2, hidden 256, 2 layers, 2 heads, lr 1e-4, batch 256)
               and at the CPU and CI scales of the BERT presets' task.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from matcomp.config import DataConfig, ModelConfig, RunConfig, TrainConfig

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
CPU7X7 = CPU.override({"name": "cpu7x7", "data.n_rows": 7, "data.n_cols": 7, "train.lr": 2e-3, "train.steps": 40000,
                       "train.checkpoint_every": 1000, "train.stop_after_drop": 12000})

SMOKE = RunConfig(
    name="smoke",
    data=DataConfig(n_rows=4, n_cols=4, rank=1, p_mask=0.3),
    model=ModelConfig(hidden=32, layers=2, heads=2),
    train=TrainConfig(steps=300, batch=64, lr=1e-3, eval_every=50, eval_batch=32, checkpoint_every=100,
                      checkpoint_steps=()),
)

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


def preset(name: str, overrides: dict[str, object] | None = None) -> RunConfig:
    """The preset ``name``, with dotted ``overrides`` applied (see ``RunConfig.override``)."""
    if name not in PRESETS:
        raise ValueError(f"preset must be one of {sorted(PRESETS)}; got {name!r}")
    return PRESETS[name].override(overrides or {})


@dataclass(frozen=True)
class ChapterSizes:
    """How big the chapters' experiments are at one preset; a step count of None means the preset's
    own ``train.steps``. The paper's lists are those of App. H and I."""

    seeds: int  # seeds of the chapters that read several (embeddings, OOD, sizes)
    drop_seeds: int  # seeds of the drop-step distribution (sudden_drop)
    component_steps: int | None  # each group trained alone (Fig. 8)
    widths: tuple[int, ...]  # App. H
    depths: tuple[int, ...]
    shape_steps: int | None  # each width or depth variant
    shape_seeds: int  # seeds per width or depth
    mixture_sizes: tuple[int, ...]  # App. I, Fig. 16 (rank 1)
    ranks: tuple[int, ...]
    size_steps: int | None  # each size or rank run alone
    gaussian_steps: int | None  # the run on Gaussian factors (App. J.1)
    completion_samples: int  # matrices per method of the nuclear-norm comparison (Fig. 3)
    lambda_samples: int  # matrices per lambda of the regularised nuclear norm (App. B)
    after_drop: int = 2000  # steps a run of a drop-step table trains past its drop (train.stop_after_drop; 0: all)
    probe_layers: int | None = None  # depth of the deeper model the probes also read (Fig. 6: 12), at half the lr
    paper_steps: bool = False  # the pre-shift model at the paper's own steps, not at fractions of the drop
    progress_seeds: int = 5  # seeds of the progress measures' leads (and the alarm's fitted thresholds)
    alarm_seeds: int = 8  # held-out seeds after those, on which the alarm is scored (``analysis.alarm``)
    shortening_seeds: int = 4  # seeds of each arm of the shortening comparison
    one_model: str | None = None  # the preset of the model the one-model chapters read (None: this one)

    def steps(self, field: str, cfg: RunConfig) -> int:
        """The steps ``field`` names for a run of ``cfg``: its own steps if None, never more."""
        return min(getattr(self, field) or cfg.train.steps, cfg.train.steps)


_PAPER_SIZES = ChapterSizes(seeds=3, drop_seeds=3, component_steps=None, widths=(64, 128, 256, 512, 768, 1024),
                            depths=(4, 6, 8, 12), shape_steps=None, shape_seeds=3, mixture_sizes=(5, 7, 9),
                            ranks=(1, 2, 3, 4), size_steps=None, gaussian_steps=None, completion_samples=512,
                            lambda_samples=256, after_drop=5000, paper_steps=True)
CHAPTER_SIZES: dict[str, ChapterSizes] = {
    "smoke": ChapterSizes(seeds=3, drop_seeds=3, component_steps=None, widths=(16, 32), depths=(1, 2),
                          shape_steps=None, shape_seeds=3, mixture_sizes=(3, 4), ranks=(1, 2), size_steps=None,
                          gaussian_steps=None, completion_samples=32, lambda_samples=32, after_drop=100,
                          probe_layers=3, progress_seeds=3, alarm_seeds=2, shortening_seeds=2),
    "cpu": ChapterSizes(seeds=3, drop_seeds=8, component_steps=None, widths=(32, 64, 128), depths=(2, 4, 6),
                        shape_steps=None, shape_seeds=3, mixture_sizes=(3, 4, 5), ranks=(1, 2),
                        size_steps=10000, gaussian_steps=None, completion_samples=512, lambda_samples=256,
                        probe_layers=12, one_model="cpu7x7"),
    "paper": _PAPER_SIZES,
    "paper12": _PAPER_SIZES,
}

# read through the one-model chapters' ``model`` parameter: the ``cpu`` scale's sizes, without a deeper probe model
CHAPTER_SIZES.update({name: replace(CHAPTER_SIZES["cpu"], probe_layers=None, one_model=None)
                      for name in ("cpu7x7", "cpu5x5")})


def chapter_sizes(name: str) -> ChapterSizes:
    """The chapters' experiment sizes at preset ``name``."""
    if name not in CHAPTER_SIZES:
        raise ValueError(f"chapter sizes exist for the presets {sorted(CHAPTER_SIZES)}; got {name!r}")
    return CHAPTER_SIZES[name]
