"""Command line: ``python -m matcomp --help`` lists the commands: train, bench and ship a preset's run; plan
and prepare every run the book needs; sweep a chapter with papermill; list presets and runs; derive the
shipped tables (``matcomp.book.stored``); and remote / unpack, for a machine lent for minutes (``matcomp.remote``)."""

from __future__ import annotations

import argparse
import math
import os
import sys

import torch

from matcomp.config import parse_assignment, parse_value
from matcomp.presets import PRESETS
from matcomp.runs.cost import duration
from matcomp.runs.store import RunError, absolute_store
from matcomp.runs.training import ENGINES, resolve_device

PRESET_HELP = "the run's preset (default: $MATCOMP_PRESET, else cpu; $MATCOMP_SEED and $MATCOMP_SET apply too)"


def _at_least(low: float, kind: type = int, strictly: bool = False, high: float | None = None, why: str = ""):
    """An argparse type: a finite number of ``kind`` >= ``low`` (> with ``strictly``) and <= ``high``, else a
    usage error naming the range (and ``why`` it ends at ``high``)."""
    def convert(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = None
        if (value is None or not math.isfinite(value) or value < low or (strictly and value == low)
                or (high is not None and value > high)):
            allowed = f"{'an integer' if kind is int else 'a number'} {'>' if strictly else '>='} {low}"
            allowed += f" and <= {high}{why}" if high is not None else ""
            raise argparse.ArgumentTypeError(f"must be {allowed}; got {text!r}")
        return value
    return convert


CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
THREADS = _at_least(1, high=CORES, why=" (this machine's cores: more threads than cores only contend)")


def _assignments(pairs: list[str], option: str = "--set", form: str = "FIELD=VALUE",
                 example: str = "train.lr=3e-4") -> dict[str, str]:
    """Repeated ``option`` values as a dict; a malformed one stops with a message naming ``option``."""
    try:
        parsed = [parse_assignment(pair, form, example) for pair in pairs]
    except ValueError as err:
        raise SystemExit(f"{option}: {err}") from None
    names = [name for name, _ in parsed]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        values = [value for name, value in parsed if name == twice[0]]
        raise SystemExit(f"{option} gives {twice[0]} {len(values)} times ({', '.join(values)}); give each once")
    return dict(parsed)


def _config(args):
    """The run config of ``--preset`` (else ``$MATCOMP_PRESET``, else cpu), after ``$MATCOMP_SET``,
    ``$MATCOMP_SEED`` and then ``--set``: the chapters' order (``matcomp.book.chapter``)."""
    from matcomp.book.chapter import chapter_config, preset_name

    args.preset = preset_name(args.preset)
    return chapter_config(args.preset, None, _assignments(args.set), plateau=False)  # any length from here


def cmd_train(args) -> None:
    from matcomp.runs.run import metrics_text
    from matcomp.runs.store import get_or_train, runs_root
    from matcomp.runs.training import Paused

    cfg = _config(args)
    print(f"run {cfg.run_id} (working store: {runs_root()})", flush=True)
    try:
        run = get_or_train(cfg, device=args.device, progress=not args.quiet, shipped=not args.no_shipped,
                           limit_s=args.limit_s, force=args.force, stop_at=args.stop_at)
    except Paused as paused:
        print(paused)
        return
    m = run.metrics.iloc[-1]
    print(f"stored in {run.path}")
    if "command" in run.summary:
        print(f"(the shipped reference run, made by: {run.summary['command']}; --no-shipped trains it here)")
    print(f"final step {int(m.step)}: {metrics_text(m, cfg)}")
    print(f"train time {run.summary['train_s']:.0f} s ({run.summary['train_s'] / run.last_step:.4f} s/step)")
    if cfg.model.arch == "bert":
        try:
            print(run.drop)
        except ValueError as err:  # a run of a hundred steps or fewer
            print(f"no drop to read: {err}")
    else:
        from matcomp.analysis.gpt import copy_onset

        print(f"copies (greedy accuracy at observed entries >= 0.5) from step {copy_onset(run.metrics)}")


def cmd_bench(args) -> None:
    from matcomp.bench import REPORT_HEADER, benchmark, engine_report, report
    from matcomp.remote import deterministic
    from matcomp.runs.machine import describe

    cfg = _config(args)
    if cfg.model.arch != "bert":
        raise SystemExit(f"error: bench compares BERT training loops; model.arch {cfg.model.arch!r} is not timed "
                         f"here (python -m matcomp train prints its s/step)")
    device = resolve_device(args.device)
    if args.engines:
        deterministic(device)  # the engines as remote trains with them
    print(f"machine: {describe()}")
    print(REPORT_HEADER)
    figures = benchmark(cfg, device, steps=args.steps, warmup=args.warmup,
                        engines=ENGINES if args.engines else ("eager",))
    print(report(args.preset, cfg, figures), flush=True)
    if args.engines:
        print(engine_report(figures), flush=True)


def cmd_ship(args) -> None:
    from matcomp.book.chapter import phase_steps
    from matcomp.runs.run import Run, verify
    from matcomp.runs.shipped import (
        add_checkpoints,
        export_reference,
        find_reference,
        narrow_reference,
        reference_steps,
    )
    from matcomp.runs.store import RunFolder, runs_root

    cfg = _config(args)
    shipped = find_reference(cfg)
    sets = "".join(f" --set {s}" for s in args.set)
    if args.add_steps is not None:  # add checkpoints retrained in the working store
        if shipped is None:
            raise SystemExit(f"error: run {cfg.run_id} is not shipped; --add-steps adds checkpoints to a shipped run")
        added = " ".join(map(str, sorted(args.add_steps)))
        command = (f"{shipped.summary['command']} && python -m matcomp train --preset {args.preset}{sets} --threads 1 "
                   f"--no-shipped --stop-at {max(args.add_steps)} && python -m matcomp ship --preset "
                   f"{args.preset}{sets} --add-steps {added}")
        shipped = add_checkpoints(shipped, RunFolder(runs_root() / cfg.run_id), args.add_steps, command)
        print(f"added steps {added} to {shipped.path} (retraced within {shipped.summary['retraced']['gap']:.2g})")
        return
    if shipped is not None and args.steps is not None:  # keep fewer of its checkpoints
        shipped = narrow_reference(shipped, args.steps)  # a step it lacks: a ValueError, one line (main)
        print(f"narrowed {shipped.path} to {len(shipped.steps)} checkpoints, "
              f"{sum(shipped.summary['files'].values()) / 2**20:.1f} MiB")
        return
    if shipped is not None:
        raise SystemExit(f"error: {shipped.path} is shipped already; delete it to ship the run again, or name "
                         f"the checkpoints to keep of it with --steps")
    folder = RunFolder(runs_root() / cfg.run_id)
    if not folder.complete_path.exists():
        raise SystemExit(f"error: run {cfg.run_id} is not finished in {runs_root()}; ship copies a trained run, "
                         f"so train it first: python -m matcomp train --preset {args.preset}{sets} --no-shipped")
    problem = verify(folder, cfg)
    if problem is not None:
        raise SystemExit(f"error: run {cfg.run_id} in {runs_root()} cannot be shipped: {problem}")
    run = Run(folder.path)
    if cfg.model.arch == "bert":
        try:
            run.drop
        except ValueError as err:  # its checkpoints could not be chosen around a drop
            raise SystemExit(f"error: run {cfg.run_id} cannot be shipped: {err}") from None
    threads = run.summary["machine"]["threads"]
    chosen = "" if args.steps is None else " --steps" + "".join(f" {step}" for step in args.steps)
    command = (f"python -m matcomp train --preset {args.preset}{sets} --threads {threads} --no-shipped && "
               f"python -m matcomp ship --preset {args.preset}{sets} --max-mb {args.max_mb:g}{chosen}")
    try:
        steps = args.steps if args.steps is not None else reference_steps(
            run, int(args.max_mb * 2**20), keep=phase_steps(run, args.preset))
        shipped = export_reference(run, steps, command)
    except ValueError as error:  # a budget too small for the checkpoints kept, or --steps without a checkpoint
        raise SystemExit(f"error: {error} (raise --max-mb, or name the checkpoints with --steps)") from None
    size = sum(shipped.summary["files"].values())
    print(f"shipped {shipped.path}: {len(steps)} checkpoints, {size / 2**20:.1f} MiB")
    print(f"steps: {steps}")


def cmd_runs(args) -> None:
    from matcomp.runs.run import summarize
    from matcomp.runs.shipped import REFERENCE_ROOT
    from matcomp.runs.store import runs_root

    for root in (REFERENCE_ROOT, runs_root()):
        print(f"{root}:")
        for path in sorted(p for p in root.glob("*-*") if p.is_dir()):
            print("  " + summarize(path))


def cmd_sweep(args) -> None:
    from matcomp.book.sweep import collect, grid, run_sweep

    names = [name for name, *_ in args.param]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise SystemExit(f"error: --param gives {twice[0]} {names.count(twice[0])} times; give each parameter once, "
                         f"with all its values (--param {twice[0]} A B ...)")
    try:
        points = grid(**{name: [parse_value(v) for v in values] for name, *values in args.param})
        fixed = {k: parse_value(v)
                 for k, v in _assignments(args.fixed, "--fixed", "NAME=VALUE", "preset=smoke").items()}
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
    from matcomp.book.chapter import preset_name
    from matcomp.book.plan import plan, plan_table
    from matcomp.runs.cost import CostBook
    from matcomp.runs.store import runs_root

    args.preset = preset_name(args.preset)
    planned = plan(args.preset, args.chapter or None)
    device = resolve_device(args.device)
    costs = CostBook(runs_root(), device, torch.get_num_threads())
    if getattr(args, "measure", False):
        for p in planned:
            costs.measure(p.cfg)
    return planned, plan_table(planned, runs_root(), costs), device


def cmd_plan(args) -> None:
    from matcomp.book.plan import plan_text

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


def cmd_presets(args) -> None:
    for name, cfg in PRESETS.items():
        d, m, t = cfg.data, cfg.model, cfg.train
        print(f"{name:8s} {d.n_rows}x{d.n_cols} rank {d.rank} p_mask {d.p_mask} | hidden {m.hidden}, "
              f"{m.layers} layers, {m.heads} heads | batch {t.batch}, lr {t.lr:g}, {t.steps} steps, {t.precision}")


def cmd_derive(args) -> None:
    from matcomp.book.stored import shipped_derivations
    from matcomp.runs.derived import SHIPPED_ROOT, ship
    from matcomp.runs.shipped import REPO
    from matcomp.runs.store import writable_store

    writable_store(SHIPPED_ROOT, "the shipped tables' folder")  # before anything is computed
    for derivation in shipped_derivations():
        path, new = ship(derivation)
        print(f"{'computed' if new else 'current '} {path.relative_to(REPO)}", flush=True)


def cmd_remote(args) -> None:
    from matcomp.remote import remote

    cfg = _config(args)
    sets = "".join(f" --set {s}" for s in args.set)
    command = (f"python -m matcomp remote --preset {args.preset}{sets} --engine {args.engine} --out DIR "
               f"(and --checkpoint STEP --out DIR2 for each other checkpoint) && python -m matcomp unpack DIR DIR2 ...")
    progress = remote(cfg, args.preset, args.out, command, limit_s=args.limit_s, device=args.device,
                      checkpoint=args.checkpoint, progress=False if args.quiet else "text", derive=args.derive,
                      engine=args.engine)
    print(progress.message)
    for path in progress.files:
        print(f"  {path.name} ({path.stat().st_size / 2**20:.1f} MiB)")


def cmd_unpack(args) -> None:
    from matcomp.runs.shipped import REFERENCE_ROOT
    from matcomp.runs.transfer import unpack

    installed = unpack(args.folders, args.into or REFERENCE_ROOT, run_id=args.run)
    run = installed.run
    print(f"installed {run.path}: {len(run.steps)} checkpoints {run.steps}, "
          f"{sum(run.summary['files'].values()) / 2**20:.1f} MiB; {len(installed.derived)} derived files")
    if installed.missing_steps:
        print(f"not come back: checkpoints {list(installed.missing_steps)} (pack each with remote --checkpoint STEP, "
              f"remove {run.path} and unpack every folder again)")


class _Parser(argparse.ArgumentParser):
    """Usage errors in two lines, the problem and where to read more, not the whole usage."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n({self.prog} --help lists the options)\n")


def _run_options(parser: argparse.ArgumentParser, device: str, threads: str) -> argparse.ArgumentParser:
    """The options of every command that trains or costs a preset's runs: its preset, device and threads."""
    parser.add_argument("--preset", default=None, choices=sorted(PRESETS), help=PRESET_HELP)
    parser.add_argument("--device", default="auto", help=device)
    parser.add_argument("--threads", type=THREADS, default=None, help=threads)
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = _Parser(prog="python -m matcomp", description=" ".join(__doc__.replace("``", "").split()))
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, helptext in (("train", "train a preset (or load it from the run store)"),
                           ("bench", "time the training step against the paper-equivalent loop"),
                           ("ship", "copy a trained run into runs/reference/, shipped with the book"),
                           ("remote", "train a run from step 0 on a machine lent for minutes and pack it, or one "
                                      "of its checkpoints, to bring home (matcomp.remote)")):
        p = _run_options(sub.add_parser(name, help=helptext), "auto (CUDA if present), cpu, cuda, cuda:1, ...",
                         "CPU threads (default: PyTorch's choice)")
        p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                       help="override a config field, e.g. --set train.lr=3e-4 (repeatable)")
    sub.choices["train"].add_argument("--quiet", action="store_true", help="no progress bar")
    sub.choices["train"].add_argument("--force", action="store_true",
                                      help="train even a run estimated beyond this machine's memory, disk or a day")
    sub.choices["train"].add_argument("--limit-s", type=_at_least(0, float, strictly=True), default=None,
                                      help="wall-clock seconds to train; it stops cleanly at a checkpoint before "
                                           "and the same command resumes")
    sub.choices["train"].add_argument("--stop-at", type=_at_least(1), default=None, metavar="STEP",
                                      help="pause at this scheduled checkpoint (resumable): the part of a run that "
                                           "ship --add-steps adds to its shipped copy")
    sub.choices["train"].add_argument("--no-shipped", action="store_true",
                                      help="train into the working store even if a shipped run matches")
    sub.choices["bench"].add_argument("--steps", type=_at_least(1, high=10000, why=" (a timing needs tens)"),
                                      default=20, help="timed steps per loop")
    sub.choices["bench"].add_argument("--warmup", type=_at_least(0), default=3, help="untimed steps first")
    sub.choices["bench"].add_argument("--engines", action="store_true",
                                      help="time every training engine (eager, ahead, graph) as remote trains with "
                                           "them (deterministic on CUDA) and name the fastest")
    sub.choices["ship"].add_argument("--max-mb", type=_at_least(0, float, strictly=True), default=30.0,
                                     help="size budget (MiB)")
    sub.choices["ship"].add_argument("--steps", type=_at_least(0), nargs="*", default=None, metavar="STEP",
                                     help="the checkpoints to keep; none named: the metrics alone (default: "
                                          "chosen within the budget, around the drop)")
    sub.choices["ship"].add_argument("--add-steps", type=_at_least(1), nargs="+", default=None, metavar="STEP",
                                     help="add these checkpoints to the shipped run from its retraining in the working "
                                          "store (train ... --no-shipped --stop-at STEP), which must retrace its "
                                          "metrics")
    sweep = sub.add_parser("sweep", help="run a chapter over a parameter grid with papermill, collect its results")
    sweep.add_argument("notebook", help="the chapter, e.g. book/sudden_drop.ipynb")
    sweep.add_argument("--out", required=True, help="folder for the executed notebooks and results.csv")
    sweep.add_argument("--param", nargs="+", action="append", default=[], metavar=("NAME", "VALUE"),
                       help="a parameter and its values, e.g. --param seed 0 1 2 (repeatable: the grid)")
    sweep.add_argument("--fixed", action="append", default=[], metavar="NAME=VALUE",
                       help="a parameter held at one value, e.g. --fixed preset=smoke (repeatable)")
    sweep.add_argument("--quiet", action="store_true", help="no progress bar")
    sweep.add_argument("--workers", type=_at_least(1), default=1,
                       help="points executed at once, as Ray tasks on an embedded instance (default 1: one by one)")
    sweep.add_argument("--address", default=None, help="a running Ray cluster (HOST:PORT) to execute the points on")
    for name, helptext in (("plan", "list every run the book's chapters need at a preset, its state and cost"),
                           ("prepare", "train every missing run of the plan in parallel on Ray")):
        p = _run_options(sub.add_parser(name, help=helptext), "where step costs are measured: auto, cpu, cuda, ...",
                         "CPU threads of this process")
        p.add_argument("--chapter", action="append", default=[], help="only this chapter's runs (repeatable)")
    sub.choices["plan"].add_argument("--measure", action="store_true",
                                     help="time a few steps of every shape not measured yet (cached)")
    prepare = sub.choices["prepare"]
    prepare.add_argument("--address", default=None, help="a running Ray cluster, HOST:PORT (default: $RAY_ADDRESS, "
                                                         "else an embedded instance on this machine)")
    prepare.add_argument("--threads-per-run", type=THREADS, default=1,
                         help="CPU threads (and Ray CPUs) of each run")
    prepare.add_argument("--gpus-per-run", type=_at_least(0, float), default=None,
                         help="GPUs of each run (default: 1 where CUDA is present, else 0)")
    prepare.add_argument("--quiet", action="store_true", help="no progress bar")
    remote = sub.choices["remote"]
    remote.add_argument("--out", required=True, help="folder for the packed parts (what comes back)")
    remote.add_argument("--limit-s", type=_at_least(0, float, strictly=True), default=None,
                        help="wall-clock seconds this command may train and derive; the run is sealed at the last "
                             "checkpoint before, its summary saying so")
    remote.add_argument("--checkpoint", type=_at_least(1), default=None, metavar="STEP",
                        help="train to this checkpoint and pack it alone (default: train the run and pack its "
                             "record and last checkpoint)")
    remote.add_argument("--engine", choices=ENGINES, default="eager",
                        help="how a step runs (python -m matcomp bench --engines times them; default eager)")
    remote.add_argument("--derive", action=argparse.BooleanOptionalAction, default=True,
                        help="compute the one-model chapters' key numbers there (--no-derive: here, after unpack, "
                             "with python -m matcomp derive)")
    remote.add_argument("--quiet", action="store_true", help="no progress bar")
    unpack = sub.add_parser("unpack", help="verify packed parts and install their run into runs/reference")
    unpack.add_argument("folders", nargs="+", help="the folders that the remote calls' files came back into")
    unpack.add_argument("--into", default=None, help="the shipped store to install into (default: runs/reference)")
    unpack.add_argument("--run", default=None, help="the run id, where the folders hold several runs")
    sub.add_parser("presets", help="list the presets")
    sub.add_parser("runs", help="list stored runs (finished or not) with their progress and drop")
    sub.add_parser("derive", help="compute the shipped derived tables (runs/reference/derived) that are missing "
                                   "or stale")
    args = parser.parse_args(argv)
    absolute_store()  # a relative store, resolved once: a sweep's points run inside book/
    if getattr(args, "threads", None):
        torch.set_num_threads(args.threads)
    commands = {"train": cmd_train, "bench": cmd_bench, "ship": cmd_ship, "presets": cmd_presets, "runs": cmd_runs,
                "sweep": cmd_sweep, "plan": cmd_plan, "prepare": cmd_prepare, "derive": cmd_derive,
                "remote": cmd_remote, "unpack": cmd_unpack}
    try:
        if hasattr(args, "device"):
            resolve_device(args.device)  # a device that is not here stops before any work
        commands[args.command](args)
    except (ValueError, RunError) as err:  # bad input, from a flag, a config field or a variable: one line
        raise SystemExit(f"error: {err}") from None
    except (torch.OutOfMemoryError, MemoryError) as err:  # what --force lets through the budget check
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise SystemExit(f"error: out of memory ({first}); the run is beyond this machine: shrink it (train.batch, "
                         f"model.hidden) or train it where it fits") from None
    except KeyboardInterrupt:  # every write is atomic and training saves its state at each checkpoint
        print("\ninterrupted: nothing is lost; a run in training resumes exactly from its last checkpoint when "
              "the same command runs again", file=sys.stderr)
        raise SystemExit(130) from None


if __name__ == "__main__":
    main(sys.argv[1:])
