"""``legato console``: the operator console (Streamlit) on ``Settings.console_port``.

The console talks to the control plane only over HTTP, so this command hands it what it needs
through its environment: ``LEGATO_API_URL`` (from ``api_host``/``api_port``) and the admin
credential (``LEGATO_ADMIN_TOKEN`` from the settings or ``<var_dir>/admin_token``). Without a
credential the operator types it in at sign-in.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

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
    env.pop("LEGATO_ADMIN_TOKEN", None)
    token = admin_token(settings)
    if token:
        env["LEGATO_ADMIN_TOKEN"] = token
    argv = (sys.executable, "-m", "streamlit", "run", str(console_script()),
            "--server.port", str(settings.console_port), "--server.address", settings.api_host,
            "--server.headless", "true", "--browser.gatherUsageStats", "false")  # fmt: skip
    return Launch(argv, env)


def console(
    ask: Annotated[
        bool, typer.Option("--ask", help="Do not pass the admin credential; sign in by hand.")
    ] = False,
) -> None:
    """Start the operator console (Streamlit) on the console port until interrupted."""
    launch = console_launch(get_settings())
    env = dict(launch.env)
    if ask:
        env.pop("LEGATO_ADMIN_TOKEN", None)
    typer.echo(f"console on http://{get_settings().api_host}:{get_settings().console_port} "
               f"(API {env['LEGATO_API_URL']})")  # fmt: skip
    try:
        code = subprocess.call(list(launch.argv), env=env)
    except KeyboardInterrupt:
        code = 0
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    """Add ``console`` to the ``legato`` command."""
    app.command("console")(console)
