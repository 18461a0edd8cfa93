"""The book's commands (``python -m matcomp --help`` lists them with the runs' own, ``matcomp.cli``): plan and
prepare every run the book needs, sweep a chapter with papermill, and derive the shipped tables
(``matcomp.book.build.stored``)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from matcomp.arguments import THREADS, assignments, at_least, run_options
from matcomp.overrides import parse_value
from matcomp.presets import preset_name
from matcomp.runs.cost import duration
from matcomp.runs.training import resolve_device


def cmd_sweep(args) -> None:
    from matcomp.book.build.sweep import collect, grid, run_sweep

    names = [name for name, *_ in args.param]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise SystemExit(f"error: --param gives {twice[0]} {names.count(twice[0])} times; give each parameter once, "
                         f"with all its values (--param {twice[0]} A B ...)")
    try:
        points = grid(**{name: [parse_value(v) for v in values] for name, *values in args.param})
        fixed = {k: parse_value(v)
                 for k, v in assignments(args.fixed, "--fixed", "NAME=VALUE", "preset=smoke").items()}
        both = sorted(set(fixed) & set(names))
        if both:
            raise ValueError(f"{both[0]} is given both by --param and by --fixed; give it once")
        notebooks = run_sweep(args.notebook, points, args.out, fixed=fixed, progress=not args.quiet,
                              workers=args.workers, address=args.address)
    except (ValueError, RuntimeError) as err:
        raise SystemExit(f"error: {err}") from None
    table = collect(args.out, notebooks)
    table.to_csv(f"{args.out}/results.csv", index=False)
    print(table.to_string(index=False))
    print(f"{len(table)} notebooks collected into {args.out}/results.csv")


def _plan(args):
    from matcomp.book.build.plan import plan, plan_table
    from matcomp.runs.cost import CostBook
    from matcomp.runs.store import runs_root

    args.preset = preset_name(args.preset)
    planned = plan(args.preset, args.chapter or None)
    device = resolve_device(args.device)
    costs = CostBook(runs_root(), device, torch.get_num_threads())
    if getattr(args, "measure", False):
        _measure(planned, costs, args.preset)
    return planned, plan_table(planned, runs_root(), costs), device


MAX_MEASURE_S = 600.0  # plan --measure refuses, at once, a plan whose timing alone would take longer


def _measure(planned: list, costs, preset: str) -> None:
    """Time a step of every shape of the plan's runs that must train here and is not measured yet, announced shape
    by shape; refused at once where the timing alone would pass ``MAX_MEASURE_S`` by the FLOP estimate (a preset
    meant for a GPU, on a CPU)."""
    from matcomp.runs.cost import MEASURE_STEPS, MEASURE_WARMUP, shape_key
    from matcomp.runs.store import locate

    steps = MEASURE_STEPS + MEASURE_WARMUP
    todo = list({shape_key(p.cfg, costs.device, costs.threads): p.cfg for p in planned
                 if locate(p.cfg).state()[0] in ("missing", "partial")}.values())
    todo = [cfg for cfg in todo if not costs.cost(cfg).measured]
    estimate = steps * sum(costs.cost(cfg).seconds for cfg in todo)
    if estimate > MAX_MEASURE_S:
        raise SystemExit(f"error: --measure would time {len(todo)} shapes at preset {preset}, about "
                         f"{duration(estimate)} on this {costs.device.type} (estimated from their FLOPs): leave "
                         f"--measure out for the estimates, or measure where these runs train")
    for number, cfg in enumerate(todo, 1):
        print(f"timing {steps} steps of {cfg.run_id} ({number} of {len(todo)} shapes)", flush=True)
        costs.measure(cfg)
  # plan --measure refuses, at once, a plan whose timing alone would take longer


def cmd_plan(args) -> None:
    from matcomp.book.build.plan import plan_text

    planned, table, device = _plan(args)
    if table.empty:
        print(f"no runs: {', '.join(args.chapter) or 'the book'} trains nothing at preset {args.preset}")
        return
    print(plan_text(table, args.preset, f"one {device.type} process with {torch.get_num_threads()} threads"))


def cmd_prepare(args) -> None:
    from tqdm.auto import tqdm

    from matcomp.runs.parallel import check_resources, train_all
    from matcomp.runs.store import runs_root, writable_store

    writable_store()  # before Ray starts: a store that cannot be written fails in a second, not after
    check_resources(args.address, args.gpus_per_run)
    planned, table, _ = _plan(args)
    todo = [p.cfg for p in planned if table.loc[p.cfg.run_id, "state"] in ("missing", "partial")]
    print(f"{len(planned)} runs at preset {args.preset}; {len(todo)} to train into {runs_root()} "
          f"({args.threads_per_run} thread(s) per run)", flush=True)
    if not todo:
        return
    left = {cfg.run_id: table.loc[cfg.run_id, "seconds left"] for cfg in todo}
    bar = tqdm(total=len(todo), unit="run", disable=args.quiet)

    def report(outcome, finished, total):
        left.pop(outcome.run_id, None)
        status = f"failed: {outcome.error}" if outcome.error else f"done in {duration(outcome.seconds)}"
        bar.write(f"{outcome.run_id}: {status}")
        bar.set_postfix_str(f"about {duration(sum(left.values()))} of training left (serial estimate)")
        bar.update(1)

    outcomes = train_all(todo, runs_root(), address=args.address, threads_per_run=args.threads_per_run,
                         gpus_per_run=args.gpus_per_run, report=report)
    bar.close()
    failed = [o for o in outcomes if o.error]
    for o in failed:
        print(f"FAILED {o.run_id}: {o.error}")
    if failed:
        raise SystemExit(f"{len(failed)} of {len(outcomes)} runs failed")
    print(f"all {len(outcomes)} runs trained")


def cmd_derive(args) -> None:
    from matcomp.book.build.stored import shipped_derivations
    from matcomp.runs.derived import SHIPPED_ROOT, ship
    from matcomp.runs.shipped import REPO
    from matcomp.runs.store import writable_store

    writable_store(SHIPPED_ROOT, "the shipped tables' folder")  # before anything is computed
    for derivation in shipped_derivations():
        path, new = ship(derivation)
        print(f"{'computed' if new else 'current '} {path.relative_to(REPO)}", flush=True)


def add_commands(sub) -> dict[str, Callable]:
    """Add the book's commands to ``sub`` (an argparse subparsers object); returns them by name."""
    sweep = sub.add_parser("sweep", help="run a chapter over a parameter grid with papermill, collect its results")
    sweep.add_argument("notebook", help="the chapter, e.g. book/sudden_drop.ipynb")
    sweep.add_argument("--out", required=True, help="folder for the executed notebooks and results.csv")
    sweep.add_argument("--param", nargs="+", action="append", default=[], metavar=("NAME", "VALUE"),
                       help="a parameter and its values, e.g. --param seed 0 1 2 (repeatable: the grid)")
    sweep.add_argument("--fixed", action="append", default=[], metavar="NAME=VALUE",
                       help="a parameter held at one value, e.g. --fixed preset=smoke (repeatable)")
    sweep.add_argument("--quiet", action="store_true", help="no line per point as it finishes")
    sweep.add_argument("--workers", type=at_least(1), default=1,
                       help="points executed at once, as Ray tasks on an embedded instance (default 1: one by one)")
    sweep.add_argument("--address", default=None, help="a running Ray cluster (HOST:PORT) to execute the points on")
    for name, helptext in (("plan", "list every run the book's chapters need at a preset, its state and cost"),
                           ("prepare", "train every missing run of the plan in parallel on Ray")):
        p = run_options(sub.add_parser(name, help=helptext), "where step costs are measured: auto, cpu, cuda, ...",
                         "CPU threads of this process")
        p.add_argument("--chapter", action="append", default=[], help="only this chapter's runs (repeatable)")
    sub.choices["plan"].add_argument("--measure", action="store_true",
                                     help="time a few steps of every shape not measured yet (cached)")
    prepare = sub.choices["prepare"]
    prepare.add_argument("--address", default=None, help="a running Ray cluster, HOST:PORT (default: $RAY_ADDRESS, "
                                                         "else an embedded instance on this machine)")
    prepare.add_argument("--threads-per-run", type=THREADS, default=1,
                         help="CPU threads (and Ray CPUs) of each run")
    prepare.add_argument("--gpus-per-run", type=at_least(0, float), default=None,
                         help="GPUs of each run (default: 1 where CUDA is present, else 0)")
    prepare.add_argument("--quiet", action="store_true", help="no progress bar")
    sub.add_parser("derive", help="compute the shipped derived tables (runs/reference/derived) that are missing "
                                   "or stale")
    return {"sweep": cmd_sweep, "plan": cmd_plan, "prepare": cmd_prepare, "derive": cmd_derive}
