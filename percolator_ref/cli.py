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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="percolator",
        description="The Percolator teaching kit: demos, benchmarks, workloads and grading "
                    "over the reference implementation of Peng & Dabek (OSDI 2010).")
    parser.add_argument("--version", action="version", version=f"percolator_ref {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        module.register(subparsers)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
