"""``legato plan``: the placement planner of a running gateway, over its admin API.

``propose`` asks ``POST /admin/placement-plans/propose`` for a plan from the demand observed over
the last ``--window-s`` (or ``--demand FILE``, a JSON demand) with ``--policy``; ``simulate``
starts the twin's replay against a plan and, with ``--wait``, prints the report when it is
done; ``rollout`` rolls a plan out (``--force`` for a plan that was not simulated: audited).
The admin token is ``LEGATO_ADMIN_TOKEN``; the gateway ``--url`` (default: the settings' host
and port). Each prints the JSON answer; an HTTP error prints its body and exits 1.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

plan_app = typer.Typer(help="Placement plans: propose, simulate, roll out.", no_args_is_help=True)

UrlOpt = Annotated[str | None, typer.Option(help="gateway URL (default: the settings')")]


def _call(url: str | None, method: str, path: str, body: Any = None) -> Any:
    import httpx

    from control.config import get_settings

    settings = get_settings()
    token = settings.admin_token.get_secret_value() if settings.admin_token else None
    if not token:
        typer.echo("LEGATO_ADMIN_TOKEN is not set", err=True)
        raise typer.Exit(2)
    base = url or f"http://{settings.api_host}:{settings.api_port}"
    r = httpx.request(method, base + path, json=body, timeout=60.0,
                      headers={"Authorization": f"Bearer {token}"})  # fmt: skip
    if r.status_code >= 400:
        typer.echo(f"{r.status_code} {r.text}", err=True)
        raise typer.Exit(1)
    return r.json()


@plan_app.command("propose")
def propose(
    policy: Annotated[str, typer.Option(help="placement policy")] = "planner",
    window_s: Annotated[float | None, typer.Option(help="observed demand window")] = None,
    demand: Annotated[Path | None, typer.Option(help="JSON file of a given demand")] = None,
    note: Annotated[str, typer.Option(help="note stored with the plan")] = "",
    url: UrlOpt = None,
) -> None:
    """Propose a plan from observed (or given) demand; prints the stored plan."""
    body: dict[str, Any] = {"policy": policy, "note": note}
    if window_s is not None:
        body["window_s"] = window_s
    if demand is not None:
        body["demand"] = json.loads(demand.read_text())
    typer.echo(json.dumps(_call(url, "POST", "/admin/placement-plans/propose", body)))


@plan_app.command("simulate")
def simulate(
    plan_id: int,
    window_s: Annotated[float | None, typer.Option(help="recent traffic replayed")] = None,
    wait: Annotated[bool, typer.Option(help="wait for the report")] = False,
    url: UrlOpt = None,
) -> None:
    """Start the twin's replay against the plan (with --wait, print the finished plan)."""
    body = {} if window_s is None else {"window_s": window_s}
    out = _call(url, "POST", f"/admin/placement-plans/{plan_id}/simulate", body)
    while wait and (out.get("simulation") or {}).get("state") == "running":
        time.sleep(1.0)
        out = _call(url, "GET", f"/admin/placement-plans/{plan_id}")
    typer.echo(json.dumps(out))


@plan_app.command("rollout")
def rollout(
    plan_id: int,
    force: Annotated[bool, typer.Option(help="roll out a plan not simulated (audited)")] = False,
    url: UrlOpt = None,
) -> None:
    """Roll the plan out on the live fleet."""
    body = {"force": force}
    typer.echo(json.dumps(_call(url, "POST", f"/admin/placement-plans/{plan_id}/rollout", body)))


def register(app: typer.Typer) -> None:
    """Add ``plan`` to the ``legato`` command."""
    app.add_typer(plan_app, name="plan")
