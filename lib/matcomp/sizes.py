"""How big the chapters' experiments are at each preset: seeds, steps, widths, samples, and the preset
of the one model the one-model chapters read (``matcomp.presets`` holds the presets themselves)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from matcomp.config import RunConfig
from matcomp.presets import preset_name


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
    ood_samples: int = 1024  # matrices per shifted variant (App. J; the authors' script draws 1,024)
    after_drop: int = 2000  # steps a run of a drop-step table trains past its drop (train.stop_after_drop; 0: all)
    probe_layers: int | None = None  # depth of the deeper model the probes also read (Fig. 6: 12), at half the lr
    paper_steps: bool = False  # the pre-shift model at the paper's own steps, not at fractions of the drop
    progress_seeds: int = 5  # seeds of the progress measures' leads (and the alarm's fitted thresholds)
    alarm_seeds: int = 8  # held-out seeds after those, on which the alarm is scored (``analysis.alarm``)
    shortening_seeds: int = 4  # seeds of each arm of the shortening comparison
    one_model: str | None = None  # the preset of the model the one-model chapters read (None: this one)
    one_model_seeds: tuple[int, ...] = (0,)  # its seeds the ladders judge, as offsets from the chapter's seed: every
    # seed trained (at cpu seeds 0-6 of cpu7x7; 1, 2, 4 and 5 shipped with their metrics alone, benchmarks/presets.md)
    ladder: tuple[str, ...] = ()  # presets of larger tasks a finding is read on beside this scale's, smallest first
    rank_search: tuple[tuple[str, str], ...] = ()  # (preset, overrides): the rank-2 search's shipped runs (sizes_ranks)
    # on these cores, then the paper's run trained on a lent GPU (shipped with its metrics alone)
    paper_scale: tuple[str, str] | None = None  # (preset, overrides): the run of the paper's scale that the one-model
    # chapters read as their top rung where it is shipped with checkpoints (trained on a lent GPU, matcomp.remote)
    nudged: int = 0  # weights nudged one at a time (``train.init_nudge``) on each of the first two drop seeds: how far
    # rounding moves one seed's drop step (sudden_drop; ``analysis.drop_spread``); 0: not measured at this scale
    gpt: str | None = None  # the GPT preset the gpt chapter trains at this scale (None: "<preset>_gpt")

    def steps(self, field: str, cfg: RunConfig) -> int:
        """The steps ``field`` names for a run of ``cfg``: its own steps if None, never more."""
        return min(getattr(self, field) or cfg.train.steps, cfg.train.steps)


PAPER_SCALE = "train.precision=tf32"  # the paper's run on a lent GPU (scripts/paper_on_gpu.sh): TF32, 50,000 steps,
# sealed where a command's wall clock stopped it and shipped with its pre-shift and last checkpoints in bf16
FIRST_PAPER_RUN = "train.precision=tf32,train.steps=32000"  # the first loan's run of it: its metrics alone came home


_PAPER_SIZES = ChapterSizes(seeds=3, drop_seeds=3, component_steps=None, widths=(64, 128, 256, 512, 768, 1024),
                            depths=(4, 6, 8, 12), shape_steps=None, shape_seeds=3, mixture_sizes=(5, 7, 9),
                            ranks=(1, 2, 3, 4), size_steps=None, gaussian_steps=None, completion_samples=512,
                            lambda_samples=256, after_drop=5000, paper_steps=True)
CHAPTER_SIZES: dict[str, ChapterSizes] = {
    "smoke": ChapterSizes(seeds=3, drop_seeds=3, component_steps=None, widths=(16, 32), depths=(1, 2),
                          shape_steps=None, shape_seeds=3, mixture_sizes=(3, 4), ranks=(1, 2), size_steps=None,
                          gaussian_steps=None, completion_samples=32, lambda_samples=32, ood_samples=64, after_drop=100,
                          probe_layers=3, progress_seeds=3, alarm_seeds=2, shortening_seeds=2, one_model_seeds=(0, 1),
                          paper_scale=("smoke", "train.precision=tf32")),  # its stand-in: the pipeline's CI test
    "cpu": ChapterSizes(seeds=3, drop_seeds=8, component_steps=None, widths=(32, 64, 128), depths=(2, 4, 6),
                        shape_steps=None, shape_seeds=3, mixture_sizes=(3, 4, 5), ranks=(1, 2),
                        size_steps=10000, gaussian_steps=None, completion_samples=512, lambda_samples=256,
                        probe_layers=12, one_model="cpu7x7", one_model_seeds=tuple(range(7)), nudged=8,
                        ladder=("cpu5x5", "cpu7x7"),
                        rank_search=tuple(("cpu", "data.n_rows=6,data.n_cols=6,data.rank=2,train.checkpoint_every=1000,"
                                                  f"train.stop_after_drop=12000,{recipe}") for recipe in (
                                              "model.hidden=128,train.lr=1e-3,train.steps=24000",
                                              "model.hidden=64,train.lr=2e-3,train.steps=29000"))
                        + tuple(("cpu7x7", f"data.n_rows=6,data.n_cols=6,data.rank=2,{recipe}train.steps=24000")
                                for recipe in ("", "model.hidden=128,train.lr=1e-3,"))
                        + (("paper", FIRST_PAPER_RUN),),  # the paper's run, on a GPU
                        paper_scale=("paper", PAPER_SCALE)),
    "paper": _PAPER_SIZES,
    # the 12-layer scale: its widths divisible by its 12 heads; its GPT the paper's (App. G trains one)
    "paper12": replace(_PAPER_SIZES, widths=(96, 192, 384, 768), gpt="paper_gpt"),
}

# read through the one-model chapters' ``model`` parameter: the ``cpu`` scale's sizes, without a deeper probe model
CHAPTER_SIZES.update({name: replace(CHAPTER_SIZES["cpu"], probe_layers=None, one_model=None, ladder=(), rank_search=(),
                                    paper_scale=None, gpt="cpu_gpt")
                      for name in ("cpu7x7", "cpu5x5")})


def chapter_sizes(name: str | None = None) -> ChapterSizes:
    """The chapters' experiment sizes at preset ``name`` (``matcomp.presets.preset_name``: None is
    ``$MATCOMP_PRESET``, else ``cpu``)."""
    name = preset_name(name)
    if name not in CHAPTER_SIZES:
        raise ValueError(f"chapter sizes exist for the presets {sorted(CHAPTER_SIZES)}; got {name!r}")
    return CHAPTER_SIZES[name]
