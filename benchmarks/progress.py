"""Times the progress chapter's measures on every shipped checkpoint of the 7×7 run: the forward passes
they need, one (``run_with_cache`` of the attention probabilities and the residual stream together, as
``analysis.progress.checkpoint_measures`` does) against two (the heads' scores from a pass of their own,
then the residual stream, as it did before), and the whole ``measures_over_training``.

    python benchmarks/progress.py
"""

from __future__ import annotations

import time

import torch

from matcomp.analysis.heads import cached_scores, head_scores
from matcomp.analysis.progress import measures_over_training
from matcomp.data import sample_batch
from matcomp.models.hooks import run_with_cache
from matcomp.runs.run import Run
from matcomp.runs.shipped import REFERENCE_ROOT
from matcomp.seeding import analysis_generator

RUN, SAMPLES, REPEATS = "cpu7x7-c275af017e", 256, 3


def median_seconds(work) -> float:
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return sorted(times)[REPEATS // 2]


@torch.no_grad()
def main() -> None:
    run = Run(REFERENCE_ROOT / RUN)
    batch = sample_batch(run.config.data, SAMPLES, analysis_generator(0))
    models = [run.bert(step, attention="eager") for step in run.steps]

    def one():
        return [cached_scores(run_with_cache(m, batch.ids, ["probs", "resid"])[1], batch.observed) for m in models]

    def two():
        return [(head_scores(m, batch), run_with_cache(m, batch.ids, ["resid"])) for m in models]

    same = all(a.equals(b[0]) for a, b in zip(one(), two()))
    first, second = median_seconds(one), median_seconds(two)
    whole = median_seconds(lambda: measures_over_training(run, run.steps, batch))
    print(f"{RUN}: {len(models)} checkpoints x {SAMPLES} matrices, {torch.get_num_threads()} threads, "
          f"median of {REPEATS}")
    print(f"  forward passes, one per checkpoint: {first:.2f} s; two: {second:.2f} s ({second / first:.2f}x); "
          f"head scores equal: {same}")
    print(f"  every measure (measures_over_training): {whole:.2f} s")


if __name__ == "__main__":
    main()
