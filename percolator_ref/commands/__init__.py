"""The ``percolator`` command line (:func:`main`).

Subcommands live in this package: each module here defines
``register(subparsers)``, which adds its parser and sets ``func(args) -> int``
as the parser's default. Adding a command is adding a module. A command's
``--backend`` is resolved by :func:`backend_url`.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import pkgutil

from .. import __version__
from .arguments import OneLineParser


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="percolator",
        description="The Percolator teaching kit: demos, benchmarks, workloads and grading "
                    "over the reference implementation of Peng & Dabek (OSDI 2010).")
    parser.add_argument("--version", action="version", version=f"percolator_ref {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND",
                                       parser_class=OneLineParser)
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
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



@contextlib.contextmanager
def backend_url(backend):
    """Resolve a command line's ``--backend``: ``"redis"`` starts a throwaway local server.

    Yields the store URL (or None for in memory); the throwaway server is
    stopped (and its files removed) on exit.
    """
    if backend != "redis":
        yield backend
        return
    from ..harness.redis_server import LocalRedisServer
    if not LocalRedisServer.available():
        raise ValueError("--backend redis needs the redis-server binary on PATH "
                         "(apt-get install redis-server), or pass redis://HOST:PORT/DB")
    with LocalRedisServer(persistent=False) as server:
        yield server.url
