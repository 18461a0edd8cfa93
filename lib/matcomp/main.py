"""``python -m matcomp``: the runs' commands (``matcomp.cli``) and the book's (``matcomp.book.commands``) under one
parser."""

from __future__ import annotations

import sys

from matcomp import cli
from matcomp.arguments import Parser
from matcomp.book import commands as book_commands

DESCRIPTION = ("Train, bench and ship a preset's run; list presets and runs; remote / unpack, for a machine lent for "
               "minutes; plan and prepare every run the book needs; sweep a chapter with papermill; derive the shipped "
               "tables.")


def main(argv: list[str] | None = None) -> None:
    parser = Parser(prog="python -m matcomp", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    commands = {**cli.add_commands(sub), **book_commands.add_commands(sub)}
    cli.dispatch(parser.parse_args(argv), commands)


if __name__ == "__main__":
    main(sys.argv[1:])
