"""``legato up``: the whole demo on one machine, as ``make up`` runs it.

Steps, each idempotent: make the server secrets (admin credential, API-key pepper) under
``var/`` if the environment gives none; migrate and seed the demo; issue one API key per demo
tenant once (kept in ``var/demo_keys.json``, mode 0600, since a key's plaintext exists only at
creation); then start the API gateway with the live runtime and executor, wait until it is ready,
start the console (printing a one-time sign-in link to it: the console itself holds no
credential) and a gentle demo load of the three tenants, and supervise them.

SIGTERM, SIGINT (Ctrl-C, even when the starting shell ignored it), SIGHUP or a child that dies
stop everything, each part given ``--drain`` seconds before it is killed; when ``up`` itself is
killed (SIGKILL), each part gets SIGTERM from the kernel. :mod:`control.commands.supervise` has
the contract.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import httpx
import typer

from app import links
from control.clock import monotonic, wall_time
from control.commands import executor_flags
from control.commands.console import console_url
from control.commands.executor_flags import ExecutorOption, RayAddressOption
from control.commands.supervise import Child, ChildExited, Stopping, Supervisor
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
    env.setdefault("LEGATO_DEMO_BURSTS", "true")  # the demo: an operator may start bursts
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


def _legato(*args: str) -> list[str]:
    return [sys.executable, "-m", "control.cli", *args]


def wait_ready(url: str, timeout_s: float, child: Child) -> None:
    """Poll ``url`` until it answers 200; fail early if the child exits."""
    deadline = monotonic() + timeout_s
    while monotonic() < deadline:
        if child.proc.poll() is not None:
            raise ChildExited(f"{child.name} exited with status {child.proc.returncode}")
        try:
            if httpx.get(url, timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        try:
            child.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            pass
    raise ChildExited(f"{child.name} was not ready at {url} within {timeout_s:.0f} s")


@dataclass(frozen=True)
class Plan:
    """What ``up`` starts, from its options."""

    console: bool
    load: bool
    runtime: bool
    ready_timeout_s: float


def up(
    console: Annotated[bool, typer.Option(help="start the Streamlit console")] = True,
    load: Annotated[bool, typer.Option(help="start a gentle demo load of three tenants")] = True,
    runtime: Annotated[
        bool, typer.Option(help="run the live runtime and executor (off: admin API only)")
    ] = True,
    ready_timeout: Annotated[float, typer.Option(help="seconds to wait for the API")] = 600.0,
    drain: Annotated[
        float, typer.Option(help="seconds the parts get to stop before they are killed")
    ] = 30.0,
    exit_when_ready: Annotated[
        bool, typer.Option(help="stop everything once all parts are up (a smoke test)")
    ] = False,
    executor: ExecutorOption = None,
    ray_address: RayAddressOption = None,
) -> None:
    """Prepare the database, seed the demo and start API, executor, demo load and console.
    ``--executor ray`` runs the executor on a Ray cluster (``--ray-address``, else a local
    head the API starts); the flags reach the API through its environment."""
    from control.services.seed import seed_demo

    executor_flags.apply(executor, ray_address)
    settings = get_settings()
    env = server_environment(settings)
    url = settings.resolved_database_url()
    seed_demo(url, settings)
    keys = ensure_demo_keys(settings, url, env["LEGATO_KEY_PEPPER"])
    plan = Plan(console, load and runtime, runtime, ready_timeout)
    with Supervisor(drain_s=drain) as supervisor:
        try:
            _start(supervisor, plan, settings, env, keys)
            if exit_when_ready:
                return
            supervisor.watch()
        except Stopping as stop:
            typer.echo(f"legato: {stop.signame}, stopping (at most {drain:.0f} s)")
        except ChildExited as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from None


def _start(
    supervisor: Supervisor, plan: Plan, settings: Settings, env: dict[str, str], keys: dict
) -> None:
    """Start the parts of ``plan`` in order, each once the one before answers."""
    api_url = f"http://{settings.api_host}:{settings.api_port}"
    api = supervisor.spawn("api", _legato("api", *([] if plan.runtime else ["--no-runtime"])), env)
    typer.echo(f"legato: waiting for the API at {api_url} (first start converts SmolLM2)")
    wait_ready(f"{api_url}/readyz", plan.ready_timeout_s, api)
    link = None
    if plan.console:
        ui = supervisor.spawn("console", _legato("console", "--no-link"), env)
        wait_ready(f"http://127.0.0.1:{settings.console_port}/_stcore/health", 120, ui)
        link = links.link(console_url(settings),
                          links.issue(settings.var_dir, env["LEGATO_ADMIN_TOKEN"], wall_time()))  # fmt: skip
    if plan.load:
        key_args = [a for name, key in keys.items() for a in ("--key", f"{name}={key}")]
        for name in keys:
            key_args += ["--tenant", name]
        supervisor.spawn("demo load", _legato(
            "loadgen", "--url", api_url, "--trace", "azure", "--route", "workflow",
            "--workflow", "rag:1", "--rate", "0.1", "--max-requests", "100000",
            "--span", "100000", "--max-output-tokens", "16", *key_args), env,
            may_finish=True)  # fmt: skip
    _banner(settings, api_url, link)


def _banner(settings: Settings, api_url: str, link: str | None) -> None:
    lines = [
        "legato is up:",
        f"  API      {api_url}  (OpenAPI: {api_url}/docs)",
        f"  admin    credential in {settings.var_dir / 'admin_token'} (or LEGATO_ADMIN_TOKEN)",
        f"  tenants  demo keys in {settings.var_dir / 'demo_keys.json'}",
    ]
    if link is not None:
        lines.insert(2, f"  console  {link}")
        lines.insert(3, "           (a one-time sign-in link; afterwards sign in with the admin "
                        "credential)")  # fmt: skip
    typer.echo("\n".join(lines))


def register(app: typer.Typer) -> None:
    app.command("up")(up)
