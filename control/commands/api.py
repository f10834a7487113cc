"""``legato api`` (the HTTP gateway over the live runtime) and ``legato loadgen``.

``api`` serves with uvicorn the gateway that :func:`control.wiring.gateway.build_gateway`
builds from the settings (it migrates nothing: run ``legato db upgrade`` first): the services,
the one-model workflows and the live runtime over the local executor, which starts and stops
with the app. ``--no-runtime`` serves the admin API alone (inference routes then answer 503).

``loadgen`` replays a trace against a running gateway as several tenants, with a progress bar
and a summary table. Tenant keys come from ``--key tenant=KEY`` or, with the admin token, are
issued for the run through the admin API (label ``loadgen``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated, Any

import typer

from control.commands import executor_flags
from control.commands.executor_flags import ExecutorOption, RayAddressOption

log = logging.getLogger("legato.api")
#: The demo tenants ``make up`` seeds; the load generator's default.
DEMO_TENANTS = ("acme", "globex", "initech")


def api(
    host: Annotated[str | None, typer.Option(help="listen address (default: settings)")] = None,
    port: Annotated[int | None, typer.Option(help="port (default: settings)")] = None,
    runtime: Annotated[bool, typer.Option(help="run the live runtime (inference)")] = True,
    drain: Annotated[
        float, typer.Option(help="seconds open requests get to finish when stopping")
    ] = 15.0,
    executor: ExecutorOption = None,
    ray_address: RayAddressOption = None,
) -> None:
    """Serve the API gateway (tenant inference + admin API) until interrupted.

    SIGTERM or SIGINT stop it in order: open requests get at most ``drain`` seconds, then the
    runtime and the executor stop (the executor asks each worker to stop and kills one that
    does not). Killed outright, it leaves no worker behind either: a worker ends when its pipe
    to this process closes (:mod:`control.executor.host.workers`). With ``--executor ray``
    the devices are the actors of a Ray cluster (``--ray-address``, else a local Ray head this
    process starts and stops)."""
    import uvicorn

    from control.config import get_settings
    from control.wiring.gateway import build_gateway

    executor_flags.apply(executor, ray_address)
    settings = get_settings()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    app = build_gateway(with_runtime=runtime)
    uvicorn.run(app, host=host or settings.api_host, port=port or settings.api_port,
                log_level="info", access_log=False, timeout_graceful_shutdown=drain,
                timeout_keep_alive=settings.api_keep_alive_s)  # fmt: skip


def _parse_keys(pairs: list[str]) -> dict[str, str]:
    keys = {}
    for pair in pairs:
        tenant, sep, key = pair.partition("=")
        if not sep or not tenant or not key:
            raise typer.BadParameter(f"--key {pair!r}: expected tenant=KEY")
        keys[tenant] = key
    return keys


async def _issue_keys(client: Any, tenants: list[str], admin: str) -> dict[str, str]:
    """Issue one key per named tenant through the admin API."""
    headers = {"Authorization": f"Bearer {admin}"}
    found = (await client.get("/admin/tenants", params={"limit": 1000}, headers=headers)).json()
    ids = {t["name"]: t["id"] for t in found.get("items", [])}
    keys = {}
    for name in tenants:
        if name not in ids:
            raise typer.BadParameter(f"tenant {name!r} does not exist on the gateway")
        r = await client.post(f"/admin/tenants/{ids[name]}/keys", json={"label": "loadgen"},
                              headers=headers)  # fmt: skip
        r.raise_for_status()
        keys[name] = r.json()["key"]
    return keys


def loadgen(
    url: Annotated[str, typer.Option(help="gateway base URL")] = "http://127.0.0.1:8700",
    trace: Annotated[str, typer.Option(help="azure | mooncake | servegen")] = "azure",
    route: Annotated[str, typer.Option(help="chat | completions | embeddings | workflow")] = "chat",
    model: Annotated[str, typer.Option(help="model for the one-model routes")] = "smollm2-135m",
    workflow: Annotated[str, typer.Option(help="name:version for --route workflow")] = "rag:1",
    tenant: Annotated[list[str] | None, typer.Option(help="tenant name (repeat)")] = None,
    weight: Annotated[
        list[int] | None, typer.Option(help="tenant weight, in --tenant order")
    ] = None,
    key: Annotated[
        list[str] | None, typer.Option(help="tenant=KEY (else issued via admin)")
    ] = None,
    rate: Annotated[float, typer.Option(help="time scale: 2.0 replays twice as fast")] = 1.0,
    max_requests: Annotated[int, typer.Option(help="stop after this many requests")] = 200,
    span: Annotated[float, typer.Option(help="seconds of (scaled) trace to replay")] = 120.0,
    max_output_tokens: Annotated[int, typer.Option(help="cap per request")] = 16,
) -> None:
    """Replay a trace against the API as several tenants; print a summary table."""
    from control.services.loadgen import LoadConfig

    config = LoadConfig(trace=trace, route=route, model=model, workflow=workflow,
                        rate_factor=rate, max_requests=max_requests, span_s=span,
                        max_output_tokens=max_output_tokens)  # fmt: skip
    tenants = tenant or list(DEMO_TENANTS)
    asyncio.run(_loadgen(url, config, tenants, weight or None, _parse_keys(key or [])))


async def _loadgen(url: str, config: Any, tenants: list[str], weights: Any, keys: dict) -> None:
    import httpx
    from rich.console import Console
    from rich.progress import Progress

    from control.clock import monotonic
    from control.config import get_settings
    from control.services import loadgen as lg

    calls = lg.plan_calls(config, lg.arrivals(config, tenants, weights))
    limits = httpx.Limits(max_connections=256, max_keepalive_connections=64)
    async with httpx.AsyncClient(base_url=url, limits=limits) as client:
        missing = [t for t in tenants if t not in keys]
        if missing:
            admin = get_settings().admin_token
            if admin is None:
                raise typer.BadParameter(f"no --key for {missing} and no LEGATO_ADMIN_TOKEN")
            keys |= await _issue_keys(client, missing, admin.get_secret_value())
        with Progress() as progress:
            bar = progress.add_task(f"{config.trace} -> {config.route}", total=len(calls))
            start = monotonic()
            outcomes = await lg.run_load(client, calls, keys, timeout_s=config.timeout_s,
                                         on_done=lambda _o: progress.advance(bar))  # fmt: skip
            wall = monotonic() - start
    Console().print(summary_table(lg.summarise(outcomes, wall)))


def summary_table(rows: list[Any]) -> Any:
    from rich.table import Table

    table = Table(title="load generator summary")
    for col in ("tenant", "sent", "ok", "429", "errors", "req/s", "p50 ms", "p99 ms"):
        table.add_column(col, justify="right" if col != "tenant" else "left")
    for r in rows:
        fmt = lambda v: "-" if v is None else f"{v:.0f}"  # noqa: E731
        table.add_row(r.tenant, str(r.sent), str(r.ok), str(r.rejected), str(r.errors),
                      f"{r.throughput_rps:.2f}", fmt(r.p50_ms), fmt(r.p99_ms))  # fmt: skip
    return table


def register(app: typer.Typer) -> None:
    """Add ``api`` and ``loadgen`` to the ``legato`` command."""
    app.command("api")(api)
    app.command("loadgen")(loadgen)
