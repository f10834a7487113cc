"""``legato up``: the whole demo on one machine, as ``make up`` runs it.

Steps, each idempotent: make the server secrets (admin credential, API-key pepper) under
``var/`` if the environment gives none; migrate and seed the demo; issue one API key per demo
tenant once (kept in ``var/demo_keys.json``, mode 0600, since a key's plaintext exists only at
creation); then start the API gateway with the live runtime and executor, wait until it is ready,
start the console and a gentle demo load of the three tenants, and supervise them. Ctrl-C (or a
child that dies) stops everything.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import httpx
import typer

from control.clock import monotonic
from control.config import Settings, get_settings
from control.services import demo_fleet

SECRET_FILES = {"LEGATO_ADMIN_TOKEN": "admin_token", "LEGATO_KEY_PEPPER": "key_pepper"}


def ensure_secret(var_dir: Path, name: str) -> str:
    """The secret in ``var_dir/name``, created (0600) on first use. Never logged."""
    path = var_dir / name
    if path.exists():
        return path.read_text().strip()
    var_dir.mkdir(parents=True, exist_ok=True)
    value = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(value + "\n")
    return value


def server_environment(settings: Settings) -> dict[str, str]:
    """The environment the children run with: secrets from the environment or ``var/``."""
    env = dict(os.environ)
    for var, filename in SECRET_FILES.items():
        if not env.get(var):
            env[var] = ensure_secret(settings.var_dir, filename)
    env.setdefault("LEGATO_VAR_DIR", str(settings.var_dir))
    env.setdefault("HF_HUB_OFFLINE", "1")
    return env


def ensure_demo_keys(settings: Settings, database_url: str, pepper: str) -> dict[str, str]:
    """One key per demo tenant, issued once and kept in ``var/demo_keys.json`` (0600)."""
    path = settings.var_dir / "demo_keys.json"
    if path.exists():
        return json.loads(path.read_text())
    from control.wiring.services import services_at

    with services_at(database_url, key_pepper=pepper.encode()) as services:
        keys = {}
        for tenant in demo_fleet.DEMO_TENANTS:
            record = services.tenants.list(name=tenant["name"])[0]
            keys[tenant["name"]] = services.api_keys.create_key(
                "up", record.id, label="demo load"
            ).plaintext
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(keys, fh)
    return keys


@dataclass
class Child:
    name: str
    proc: subprocess.Popen


def _legato(*args: str) -> list[str]:
    return [sys.executable, "-m", "control.cli", *args]


def _spawn(name: str, args: list[str], env: dict[str, str]) -> Child:
    """Start a child in its own session: a Ctrl-C at the terminal reaches only ``up``, which
    then stops each child once, in order (a second signal would make uvicorn abort)."""
    return Child(name, subprocess.Popen(args, env=env, start_new_session=True))


def wait_ready(url: str, timeout_s: float, child: Child) -> None:
    """Poll ``url`` until it answers 200; fail early if the child exits."""
    deadline = monotonic() + timeout_s
    while monotonic() < deadline:
        if child.proc.poll() is not None:
            raise RuntimeError(f"{child.name} exited with status {child.proc.returncode}")
        try:
            if httpx.get(url, timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        try:
            child.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            pass
    raise RuntimeError(f"{child.name} was not ready at {url} within {timeout_s:.0f} s")


def _signal_group(child: Child, sig: int) -> None:
    """Signal the child's whole process group: a child such as ``legato console`` runs its
    own subprocess (Streamlit), which must stop with it."""
    try:
        os.killpg(child.proc.pid, sig)
    except ProcessLookupError:
        pass


def _stop(children: list[Child]) -> None:
    for child in reversed(children):
        _signal_group(child, signal.SIGTERM)
    for child in reversed(children):
        try:
            child.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            _signal_group(child, signal.SIGKILL)
            child.proc.wait()


def up(
    console: Annotated[bool, typer.Option(help="start the Streamlit console")] = True,
    load: Annotated[bool, typer.Option(help="start a gentle demo load of three tenants")] = True,
    ready_timeout: Annotated[float, typer.Option(help="seconds to wait for the API")] = 600.0,
    exit_when_ready: Annotated[
        bool, typer.Option(help="stop everything once all parts are up (a smoke test)")
    ] = False,
) -> None:
    """Prepare the database, seed the demo and start API, executor, demo load and console."""
    from control.services.seed import seed_demo

    settings = get_settings()
    env = server_environment(settings)
    url = settings.resolved_database_url()
    seed_demo(url, settings)
    keys = ensure_demo_keys(settings, url, env["LEGATO_KEY_PEPPER"])
    api_url = f"http://{settings.api_host}:{settings.api_port}"
    children: list[Child] = []
    try:
        api = _spawn("api", _legato("api"), env)
        children.append(api)
        typer.echo(f"legato: waiting for the API at {api_url} (first start converts SmolLM2)")
        wait_ready(f"{api_url}/readyz", ready_timeout, api)
        if console:
            children.append(_spawn("console", _legato("console"), env))
            wait_ready(
                f"http://127.0.0.1:{settings.console_port}/_stcore/health", 120, children[-1]
            )
        if load:
            key_args = [a for name, key in keys.items() for a in ("--key", f"{name}={key}")]
            for name in keys:
                key_args += ["--tenant", name]
            children.append(_spawn("demo load", _legato(
                "loadgen", "--url", api_url, "--trace", "azure", "--route", "workflow",
                "--workflow", "rag:1", "--rate", "0.1", "--max-requests", "100000",
                "--span", "100000", "--max-output-tokens", "16", *key_args), env))  # fmt: skip
        _banner(settings, api_url, console)
        if exit_when_ready:
            return
        _supervise(children)
    except KeyboardInterrupt:
        typer.echo("legato: stopping")
    except RuntimeError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    finally:
        _stop(children)


def _banner(settings: Settings, api_url: str, console: bool) -> None:
    lines = [
        "legato is up:",
        f"  API      {api_url}  (OpenAPI: {api_url}/docs)",
        f"  admin    credential in {settings.var_dir / 'admin_token'} (or LEGATO_ADMIN_TOKEN)",
        f"  tenants  demo keys in {settings.var_dir / 'demo_keys.json'}",
    ]
    if console:
        lines.insert(2, f"  console  http://127.0.0.1:{settings.console_port}")
    typer.echo("\n".join(lines))


def _supervise(children: list[Child]) -> None:
    """Wait until a child exits; a demo load that finishes is fine, anything else stops all."""
    while True:
        for child in children:
            code = child.proc.poll()
            if code is None:
                continue
            if child.name == "demo load" and code == 0:
                children.remove(child)
                break
            raise RuntimeError(f"{child.name} exited with status {code}; stopping the rest")
        try:
            children[0].proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            pass


def register(app: typer.Typer) -> None:
    app.command("up")(up)
