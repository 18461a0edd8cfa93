"""The command line's argument types and shared options (``matcomp.cli`` and the book's commands,
``matcomp.book.build.commands``): a bad value is a usage error in two lines that names the option and what it may be."""

from __future__ import annotations

import argparse
import math
import os

from matcomp.overrides import once_each, parse_assignment

PRESET_HELP = "the run's preset (default: $MATCOMP_PRESET, else cpu; $MATCOMP_SEED and $MATCOMP_SET apply too)"


def at_least(low: float, kind: type = int, strictly: bool = False, high: float | None = None, why: str = ""):
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


def folder(text: str) -> str:
    """An argparse type: a path that names a folder; an empty one (an unset shell variable: ``Path("")`` is the
    current folder) is a usage error."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"must name a folder; got {text!r}")
    return text


CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
THREADS = at_least(1, high=CORES, why=" (this machine's cores: more threads than cores only contend)")


def assignments(pairs: list[str], option: str = "--set", form: str = "FIELD=VALUE",
                 example: str = "train.lr=3e-4") -> dict[str, str]:
    """Repeated ``option`` values as a dict; a malformed one stops with a message naming ``option``."""
    try:
        parsed = [parse_assignment(pair, form, example) for pair in pairs]
    except ValueError as err:
        raise SystemExit(f"{option}: {err}") from None
    try:
        return once_each(parsed, option)
    except ValueError as err:
        raise SystemExit(str(err)) from None


class Parser(argparse.ArgumentParser):
    """Usage errors in two lines, the problem and where to read more, not the whole usage."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n({self.prog} --help lists the options)\n")


def run_options(parser: argparse.ArgumentParser, device: str, threads: str) -> argparse.ArgumentParser:
    """The options of every command that trains or costs a preset's runs: its preset, device and threads."""
    from matcomp.presets import PRESETS  # here, not at the top: the scripts' Parser loads no PyTorch to say a usage

    parser.add_argument("--preset", default=None, choices=sorted(PRESETS), help=PRESET_HELP)
    parser.add_argument("--device", default="auto", help=device)
    parser.add_argument("--threads", type=THREADS, default=None, help=threads)
    return parser
