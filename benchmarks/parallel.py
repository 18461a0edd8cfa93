"""Sequential training against ``prepare``'s parallel training on an embedded Ray instance.

The same runs (``--runs`` runs of the cpu preset, ``--steps`` steps each, distinct seeds) are trained
(a) one after another in this process with all of this machine's cores as threads, and (b) by
``matcomp.runs.parallel.train_all`` on an embedded Ray instance, one thread per run and as many runs
at once as cores. Each side trains into a fresh temporary store. Prints the wall times and their
ratio; asserts nothing (``benchmarks/RESULTS.md`` records what it printed).

    python benchmarks/parallel.py [--runs 4] [--steps 1000]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import torch

from matcomp.presets import preset_config
from matcomp.runs.parallel import train_all
from matcomp.runs.store import get_or_train


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args()
    cores = os.cpu_count()
    configs = [preset_config("cpu", {"train.seed": 100 + i, "train.steps": args.steps,
                                     "train.checkpoint_every": args.steps})
               for i in range(args.runs)]
    print(f"{args.runs} runs of the cpu preset, {args.steps:,} steps each, on {cores} cores")

    torch.set_num_threads(cores)
    with tempfile.TemporaryDirectory() as root:
        start = time.perf_counter()
        for cfg in configs:
            get_or_train(cfg, progress=False, root=Path(root))
        sequential = time.perf_counter() - start
    print(f"(a) sequential, {cores} threads: {sequential:.1f} s ({sequential / args.runs / args.steps:.4f} s/step)")

    with tempfile.TemporaryDirectory() as root:
        start = time.perf_counter()
        outcomes = train_all(configs, Path(root), threads_per_run=1, num_cpus=cores)
        parallel = time.perf_counter() - start
    failed = [o for o in outcomes if o.error]
    if failed:
        raise SystemExit(f"runs failed: {failed}")
    print(f"(b) prepare on embedded Ray, {cores} runs x 1 thread: {parallel:.1f} s (Ray start-up included)")
    print(f"throughput ratio (a)/(b): {sequential / parallel:.2f}x")


if __name__ == "__main__":
    main()
