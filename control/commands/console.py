"""``legato console``: the operator console (Streamlit) on ``Settings.console_port``.

The console talks to the control plane only over HTTP, so this command hands it what it needs
through its environment: ``LEGATO_API_URL`` (from ``api_host``/``api_port``) and
``LEGATO_VAR_DIR``, and never a credential (``LEGATO_ADMIN_TOKEN`` and the key pepper are taken
out of its environment): a credential the Streamlit process held would sign in every browser.
Each browser session signs in by presenting the admin credential; when this command knows it
(the settings or ``<var_dir>/admin_token``), it prints a one-time sign-in link instead
(:mod:`app.links`), as notebook servers do.

The command becomes Streamlit (``exec``), so that whatever supervises it (``legato up``, a
service manager) signals, and waits for, Streamlit itself, with nothing in between to orphan it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from control.clock import wall_time
from control.config import Settings, get_settings


@dataclass(frozen=True)
class Launch:
    """The Streamlit command line and the environment it runs with."""

    argv: tuple[str, ...]
    env: dict[str, str]


def console_script() -> Path:
    """app/main.py of the installed console (found without importing it)."""
    spec = importlib.util.find_spec("app")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the console package 'app' is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "main.py"


def admin_token(settings: Settings) -> str | None:
    """The admin credential from the settings, else from ``<var_dir>/admin_token``."""
    if settings.admin_token is not None and settings.admin_token.get_secret_value():
        return settings.admin_token.get_secret_value()
    path = settings.var_dir / "admin_token"
    text = path.read_text(encoding="utf-8").strip() if path.is_file() else ""
    return text or None


def console_launch(settings: Settings, base_env: dict[str, str] | None = None) -> Launch:
    """What ``legato console`` runs: pure, so a test can check it without starting anything."""
    env = dict(os.environ if base_env is None else base_env)
    host = "127.0.0.1" if settings.api_host in ("0.0.0.0", "::") else settings.api_host
    env["LEGATO_API_URL"] = f"http://{host}:{settings.api_port}"
    env["LEGATO_VAR_DIR"] = str(settings.var_dir)
    for secret in ("LEGATO_ADMIN_TOKEN", "LEGATO_KEY_PEPPER"):
        env.pop(secret, None)
    argv = (sys.executable, "-m", "streamlit", "run", str(console_script()),
            "--server.port", str(settings.console_port), "--server.address", settings.api_host,
            "--server.headless", "true", "--browser.gatherUsageStats", "false",
            "--client.toolbarMode", "viewer")  # fmt: skip
    return Launch(argv, env)


def console_url(settings: Settings) -> str:
    """Where a browser on this machine opens the console."""
    host = "127.0.0.1" if settings.api_host in ("0.0.0.0", "::") else settings.api_host
    return f"http://{host}:{settings.console_port}"


def sign_in_link(settings: Settings) -> str | None:
    """A fresh one-time sign-in link to the console, or None without an admin credential."""
    from app import links  # the console's own ticket format (standard library only)

    token = admin_token(settings)
    if token is None:
        return None
    return links.link(console_url(settings), links.issue(settings.var_dir, token, wall_time()))


def console(
    link: Annotated[
        bool, typer.Option(help="Print a one-time sign-in link (needs the admin credential).")
    ] = True,
) -> None:
    """Start the operator console (Streamlit) on the console port until interrupted."""
    settings = get_settings()
    launch = console_launch(settings)
    typer.echo(f"console on {console_url(settings)} (API {launch.env['LEGATO_API_URL']})")
    found = sign_in_link(settings) if link else None
    if found is not None:
        typer.echo(f"  sign in once with {found}")
    sys.stdout.flush()
    os.execve(launch.argv[0], list(launch.argv), launch.env)


def register(app: typer.Typer) -> None:
    """Add ``console`` to the ``legato`` command."""
    app.command("console")(console)
