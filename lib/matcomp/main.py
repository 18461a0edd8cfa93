"""``python -m matcomp``: the runs' commands (``matcomp.cli``) and the book's (``matcomp.book.build.commands``) under
one parser."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

import torch

from matcomp import cli
from matcomp.arguments import Parser
from matcomp.book.build import commands as book_commands
from matcomp.limits import exhausted, exhausted_text
from matcomp.runs.store import RunError, absolute_store
from matcomp.runs.training import resolve_device

DESCRIPTION = ("Train, bench and ship a preset's run; list presets and runs; remote / unpack, for a machine lent for "
               "minutes; export a run's model for plain transformers, and card the shipped paper runs; plan and "
               "prepare every run the book needs; sweep a chapter with papermill; derive the shipped tables.")


def main(argv: list[str] | None = None) -> None:
    parser = Parser(prog="python -m matcomp", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    commands = {**cli.add_commands(sub), **book_commands.add_commands(sub)}
    dispatch(parser.parse_args(argv), commands)


def dispatch(args: argparse.Namespace, commands: dict[str, Callable]) -> None:
    """Run the command ``args`` names; bad input, running out of memory and an interrupt end in one line."""
    absolute_store()  # a relative store, resolved once: a sweep's points run inside book/
    if getattr(args, "threads", None):
        torch.set_num_threads(args.threads)
    try:
        if hasattr(args, "device"):
            resolve_device(args.device)  # a device that is not here stops before any work
        commands[args.command](args)
    except (ValueError, RunError) as err:  # bad input, from a flag, a config field or a variable: one line
        raise SystemExit(f"error: {err}") from None
    except (MemoryError, RuntimeError, OSError) as err:  # beyond this machine: what --force lets through, a full disk
        kind = exhausted(err)
        if kind is None:
            raise
        advice = {"memory": "what it asked for is beyond this machine: shrink it (train.batch, model.hidden) or run "
                            "it where it fits", "disk": "free space there; a run resumes from its last checkpoint",
                  "path": "name a shorter path"}[kind]
        raise SystemExit(f"error: {exhausted_text(err)}; {advice}") from None
    except KeyboardInterrupt:  # every write is atomic and training saves its state at each checkpoint
        print("\ninterrupted: nothing is lost; a run in training resumes exactly from its last checkpoint when "
              "the same command runs again", file=sys.stderr)
        raise SystemExit(130) from None


if __name__ == "__main__":
    main(sys.argv[1:])
