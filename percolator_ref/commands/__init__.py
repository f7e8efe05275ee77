"""Subcommands of ``percolator``: one module each, with ``register(subparsers)``."""
