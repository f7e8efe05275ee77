"""The ``percolator`` command line.

Subcommands live in ``percolator_ref/commands/``: each module there defines
``register(subparsers)``, which adds its parser and sets ``func(args) -> int``
as the parser's default. Adding a command is adding a module.
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from . import __version__, commands
from .commands.arguments import OneLineParser


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="percolator",
        description="The Percolator teaching kit: demos, benchmarks, workloads and grading "
                    "over the reference implementation of Peng & Dabek (OSDI 2010).")
    parser.add_argument("--version", action="version", version=f"percolator_ref {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND",
                                       parser_class=OneLineParser)
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        if hasattr(module, "register"):       # (arguments.py is shared, not a command)
            module.register(subparsers)
    return parser


def main(argv=None) -> int:
    """Run the command; its exit status (2, after one line on stderr, for a bad argument)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as done:            # --help, --version, or a refused argument
        return done.code
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
