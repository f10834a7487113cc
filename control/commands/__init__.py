"""Sub-commands of ``legato``, one module each, registered by :func:`register_all`.

A module exports ``register(app: typer.Typer)``; keeping each command family in its own module
keeps ``control/cli.py`` small and lets each part of Legato own its command line.
"""

from __future__ import annotations

import importlib

import typer

#: Command modules, in the order their commands appear in ``legato --help``.
COMMAND_MODULES: tuple[str, ...] = ("up", "api", "serve", "profile", "sim", "console", "plan")


def register_all(app: typer.Typer) -> None:
    """Import every command module and let it add its commands to ``app``."""
    for name in COMMAND_MODULES:
        importlib.import_module(f"control.commands.{name}").register(app)
