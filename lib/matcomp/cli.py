"""The commands that train, time, ship and move one preset's run (``python -m matcomp --help`` lists them with
the book's, ``matcomp.book.build.commands``): train, bench and ship a run; list presets and runs; remote / unpack,
for a machine lent for minutes (``matcomp.remote``); export a run's model for plain ``transformers`` and write the
shipped paper runs' model cards (``matcomp.runs.export``, ``matcomp.runs.card``). They build runs from
``matcomp.presets`` and never read the book."""

from __future__ import annotations

from collections.abc import Callable

from matcomp.arguments import assignments, at_least, folder, run_options
from matcomp.presets import PRESETS, preset_name, resolved_config
from matcomp.runs.engines import ENGINES, MASKS, WORKSPACE, Engine
from matcomp.runs.training import resolve_device


def _config(args):
    """The run config of ``--preset`` (else ``$MATCOMP_PRESET``, else cpu), after ``$MATCOMP_SET``,
    ``$MATCOMP_SEED`` and then ``--set``, as a chapter's (``matcomp.presets.resolved_config``), of any length."""
    args.preset = preset_name(args.preset)
    return resolved_config(args.preset, assignments(args.set))


def cmd_train(args) -> None:
    from matcomp.runs.run import metrics_text
    from matcomp.runs.store import get_or_train, runs_root
    from matcomp.runs.training import Paused

    cfg = _config(args)
    if args.stop_at is not None:
        _check_stop_at(cfg, args.stop_at, shipped=not args.no_shipped)
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


def _check_stop_at(cfg, step: int, shipped: bool) -> None:
    """``--stop-at STEP`` refused where it could not pause the run: one shipped or finished (nothing to pause), or
    one whose store holds its training past the step already (it would train on to its end)."""
    from matcomp.runs.store import locate

    where = locate(cfg)
    state, done = where.state(shipped)
    if state == "shipped":
        raise ValueError(f"--stop-at {step}: run {cfg.run_id} is shipped finished (runs/reference), nothing to pause; "
                         f"add --no-shipped to train it in the working store and pause it there")
    if state == "stored":
        raise ValueError(f"--stop-at {step}: run {cfg.run_id} is finished in {where.root} already, nothing to pause")
    if done >= step:
        raise ValueError(f"--stop-at {step}: run {cfg.run_id} has trained to step {done:,} in {where.root} already; "
                         f"name a later checkpoint, or leave --stop-at out")


def cmd_bench(args) -> None:
    from matcomp.bench import REPORT_HEADER, benchmark, engine_report, report
    from matcomp.remote import deterministic
    from matcomp.runs.cost import memory_problem
    from matcomp.runs.machine import describe

    cfg = _config(args)
    if cfg.model.arch != "bert":
        raise SystemExit(f"error: bench compares BERT training loops; model.arch {cfg.model.arch!r} is not timed "
                         f"here (python -m matcomp train prints its s/step)")
    device = resolve_device(args.device)
    problem = memory_problem(cfg, device)
    if problem is not None:
        raise ValueError(f"run {cfg.run_id} cannot be timed here: {problem}; shrink it")
    print(f"machine: {describe()}", flush=True)
    if args.levers:
        from matcomp.levers import report as lever_report
        from matcomp.levers import time_levers

        timings = time_levers(cfg, device, args.steps, args.warmup, args.budget_s)
        print(lever_report(timings, cfg, args.steps + args.warmup), flush=True)
        return
    if args.engines:
        deterministic(device)  # the engines as remote trains with them
    print(REPORT_HEADER)
    figures = benchmark(cfg, device, steps=args.steps, warmup=args.warmup,
                        engines=ENGINES if args.engines else ("eager",))
    print(report(args.preset, cfg, figures), flush=True)
    if args.engines:
        print(engine_report(figures), flush=True)


def cmd_ship(args) -> None:
    from matcomp.analysis.phases import phase_checkpoints
    from matcomp.runs.folder import RunFolder
    from matcomp.runs.run import Run, verify
    from matcomp.runs.shipped import (
        add_checkpoints,
        export_reference,
        find_reference,
        narrow_reference,
        reference_steps,
    )
    from matcomp.runs.store import runs_root

    cfg = _config(args)
    shipped = find_reference(cfg)
    sets = "".join(f" --set {s}" for s in args.set)
    if args.add_steps is not None:  # add checkpoints retrained in the working store
        if shipped is None:
            raise SystemExit(f"error: run {cfg.run_id} is not shipped; --add-steps adds checkpoints to a shipped run")
        added = " ".join(map(str, sorted(args.add_steps)))
        retrain = f"python -m matcomp train --preset {args.preset}{sets} --threads 1 --no-shipped"
        command = (f"{shipped.summary['command']} && {retrain} --stop-at {max(args.add_steps)} && python -m matcomp "
                   f"ship --preset {args.preset}{sets} --add-steps {added}")
        shipped = add_checkpoints(shipped, RunFolder(runs_root() / cfg.run_id), args.add_steps, command, retrain)
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
            run, int(args.max_mb * 2**20), keep=phase_checkpoints(run))
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


def cmd_presets(args) -> None:
    for name, cfg in PRESETS.items():
        d, m, t = cfg.data, cfg.model, cfg.train
        print(f"{name:8s} {d.n_rows}x{d.n_cols} rank {d.rank} p_mask {d.p_mask} | hidden {m.hidden}, "
              f"{m.layers} layers, {m.heads} heads | batch {t.batch}, lr {t.lr:g}, {t.steps} steps, {t.precision}")


def cmd_remote(args) -> None:
    from matcomp.remote import remote

    cfg = _config(args)
    sets = "".join(f" --set {s}" for s in args.set)
    engine = Engine(args.engine, args.compile, args.attention_mask)
    levers = " ".join([*engine.flags(), "--cublas-workspace", args.cublas_workspace])
    command = (f"python -m matcomp remote --preset {args.preset}{sets} {levers} --out DIR "
               f"(and --checkpoint STEP --out DIR2 for each other checkpoint) && python -m matcomp unpack DIR DIR2 ...")
    progress = remote(cfg, args.out, command, limit_s=args.limit_s, device=args.device,
                      checkpoint=args.checkpoint, progress=False if args.quiet else "text", engine=engine,
                      workspace=args.cublas_workspace, writes=args.write_steps)
    print(progress.message)
    for path in progress.files:
        print(f"  {path.name} ({path.stat().st_size / 2**20:.1f} MiB)")


def cmd_unpack(args) -> None:
    from matcomp.runs.shipped import REFERENCE_ROOT
    from matcomp.runs.transfer import unpack

    installed = unpack(args.folders, REFERENCE_ROOT if args.into is None else args.into, run_id=args.run)
    run = installed.run
    print(f"installed {run.path}: {len(run.steps)} checkpoints {run.steps}, "
          f"{sum(run.summary['files'].values()) / 2**20:.1f} MiB (python -m matcomp derive computes its tables)")
    if installed.missing_steps:
        print(f"not come back: checkpoints {list(installed.missing_steps)} (pack each with remote --checkpoint STEP, "
              f"remove {run.path} and unpack every folder again)")
    if installed.skipped:
        print(f"left as they are, not {run.config.run_id}'s: {', '.join(path.name for path in installed.skipped)}")


def cmd_export(args) -> None:
    from matcomp.runs.export import export, find_run

    run = find_run(args.run)
    exported = export(run, args.out, args.step)  # a bad step or --out: a ValueError before any work, one line
    print(f"exported step {exported.step:,} of {run.config.run_id} ({exported.dtype}) to {exported.path}: "
          f"BertModel.from_pretrained(folder, add_pooling_layer=False) loads it, its read-out beside it; its "
          f"README.md says how" if run.config.model.arch == "bert" else
          f"exported step {exported.step:,} of {run.config.run_id} ({exported.dtype}) to {exported.path}: "
          f"GPT2LMHeadModel.from_pretrained(folder) loads it; its README.md says how")


def cmd_card(args) -> None:
    from matcomp.runs.card import CARD, carded_runs, model_card
    from matcomp.runs.export import find_run

    runs = [find_run(name) for name in args.runs] if args.runs else carded_runs()
    for run in runs:
        (run.path / CARD).write_text(model_card(run))
        print(f"wrote {run.path / CARD}")


def add_commands(sub) -> dict[str, Callable]:
    """Add the commands that train, time, ship and move runs to ``sub`` (an argparse subparsers object); returns
    them by name."""
    for name, helptext in (("train", "train a preset (or load it from the run store)"),
                           ("bench", "time the training step against the paper-equivalent loop"),
                           ("ship", "copy a trained run into runs/reference/, shipped with the book"),
                           ("remote", "train a run from step 0 on a machine lent for minutes and pack it, or one "
                                      "of its checkpoints, to bring home (matcomp.remote)")):
        p = run_options(sub.add_parser(name, help=helptext), "auto (CUDA if present), cpu, cuda, cuda:1, ...",
                         "CPU threads (default: PyTorch's choice)")
        p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                       help="override a config field, e.g. --set train.lr=3e-4 (repeatable)")
    sub.choices["train"].add_argument("--quiet", action="store_true", help="no progress bar")
    sub.choices["train"].add_argument("--force", action="store_true",
                                      help="train even a run estimated beyond this machine's memory, disk or a day")
    sub.choices["train"].add_argument("--limit-s", type=at_least(0, float, strictly=True), default=None,
                                      help="wall-clock seconds to train; it stops cleanly at a checkpoint before "
                                           "and the same command resumes")
    sub.choices["train"].add_argument("--stop-at", type=at_least(1), default=None, metavar="STEP",
                                      help="pause at this scheduled checkpoint (resumable): the part of a run that "
                                           "ship --add-steps adds to its shipped copy")
    sub.choices["train"].add_argument("--no-shipped", action="store_true",
                                      help="train into the working store even if a shipped run matches")
    sub.choices["bench"].add_argument("--steps", type=at_least(1, high=10000, why=" (a timing needs tens)"),
                                      default=20, help="timed steps per loop")
    sub.choices["bench"].add_argument("--warmup", type=at_least(0), default=3, help="untimed steps first")
    sub.choices["bench"].add_argument("--engines", action="store_true",
                                      help="time every training engine (eager, ahead, graph) as remote trains with "
                                           "them (deterministic on CUDA) and name the fastest")
    sub.choices["bench"].add_argument("--levers", action="store_true",
                                      help="train the run twice from step 0 (--warmup + --steps steps) by each "
                                           "combination of levers (engine, compile, attention mask, cuBLAS "
                                           "workspace), refuse those whose two trainings differ, and print the "
                                           "fastest as remote options (matcomp.levers)")
    sub.choices["bench"].add_argument("--budget-s", type=at_least(0, float, strictly=True), default=90.0,
                                      help="--levers: seconds for all its timings together (default 90)")
    sub.choices["ship"].add_argument("--max-mb", type=at_least(0, float, strictly=True), default=30.0,
                                     help="size budget (MiB)")
    sub.choices["ship"].add_argument("--steps", type=at_least(0), nargs="*", default=None, metavar="STEP",
                                     help="the checkpoints to keep; none named: the metrics alone (default: "
                                          "chosen within the budget, around the drop)")
    sub.choices["ship"].add_argument("--add-steps", type=at_least(1), nargs="+", default=None, metavar="STEP",
                                     help="add these checkpoints to the shipped run from its retraining in the working "
                                          "store (train ... --no-shipped --stop-at STEP), which must retrace its "
                                          "metrics")
    remote = sub.choices["remote"]
    remote.add_argument("--out", required=True, type=folder, help="folder for the packed parts (what comes back)")
    remote.add_argument("--limit-s", type=at_least(0, float, strictly=True), default=None,
                        help="wall-clock seconds this command may train; the run is sealed at the last "
                             "checkpoint before, its summary saying so")
    remote.add_argument("--checkpoint", type=at_least(1), default=None, metavar="STEP",
                        help="train to this checkpoint and pack it alone (default: train the run and pack its "
                             "record and last checkpoint)")
    remote.add_argument("--engine", choices=ENGINES, default="eager",
                        help="how a step runs (python -m matcomp bench --levers times them; default eager)")
    remote.add_argument("--compile", action="store_true", help="torch.compile the model (matcomp.runs.engines)")
    remote.add_argument("--attention-mask", choices=MASKS, default="none",
                        help="none (default, as every run trained) or the paper's all-ones mask, read by SDPA")
    remote.add_argument("--cublas-workspace", default=WORKSPACE, metavar=":KiB:COUNT",
                        help=f"CUBLAS_WORKSPACE_CONFIG of the deterministic mode on CUDA (default {WORKSPACE})")
    remote.add_argument("--write-steps", type=at_least(0), nargs="+", default=None, metavar="STEP",
                        help="write only these scheduled checkpoints and the last (default: every scheduled one), "
                             "e.g. the step --checkpoint brings back")
    remote.add_argument("--quiet", action="store_true", help="no progress bar")
    unpack = sub.add_parser("unpack", help="verify packed parts and install their run into runs/reference")
    unpack.add_argument("folders", nargs="+", type=folder,
                        help="the folders that the remote calls' files came back into")
    unpack.add_argument("--into", default=None, type=folder,
                        help="the shipped store to install into (default: runs/reference)")
    unpack.add_argument("--run", default=None, help="the run id, where the folders hold several runs")
    export = sub.add_parser("export", help="write a run's checkpoint as a folder plain transformers loads "
                                           "(BertModel.from_pretrained), its read-out and model card beside it")
    export.add_argument("run", help="a run id (shipped or in the run store) or a run folder")
    export.add_argument("--step", type=at_least(0), default=None, help="the checkpoint (default: the run's last)")
    export.add_argument("--out", required=True, help="a new (or empty) folder for the export")
    card = sub.add_parser("card", help="write the model card (README.md) of shipped paper-scale runs into their "
                                       "folders, from their own files")
    card.add_argument("runs", nargs="*", help="run ids or folders (default: every shipped run of a paper preset)")
    sub.add_parser("presets", help="list the presets")
    sub.add_parser("runs", help="list stored runs (finished or not) with their progress and drop")
    return {"train": cmd_train, "bench": cmd_bench, "ship": cmd_ship, "presets": cmd_presets, "runs": cmd_runs,
            "remote": cmd_remote, "unpack": cmd_unpack, "export": cmd_export, "card": cmd_card}
