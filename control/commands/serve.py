"""``legato serve``: the live driver with the executor on this machine's devices.

Reads the fleet once from the database (``load_fleet_state`` without declared devices and
models), loads the active placement (or one replica of each local model, round-robin over the
devices, when no plan is active) and the vector indexes the workflows name, then runs until
interrupted, logging throughput. The API issue puts the HTTP gateway in front of
:func:`build_live_runtime`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated

import typer

log = logging.getLogger("legato.serve")


#: Documents of the indexes the demo workflows search (``params.index``).
def _index_documents() -> dict[str, tuple[str, ...]]:
    from control.services.demo_fleet import DEMO_DOCUMENTS

    return {"demo-docs": DEMO_DOCUMENTS}


def _placement(fleet, device_ids: list[str]):  # noqa: ANN001, ANN202
    from control.runtime.live import InitialReplica
    from control.runtime.wiring import one_of_each

    planned = [
        InitialReplica(p.model_key, p.device_ids[0], p.pool)
        for p in fleet.placement
        for _ in range(p.replicas)
        if p.model_key in fleet.model_refs and p.device_ids[0] in device_ids
    ]
    return tuple(planned) or one_of_each(sorted(fleet.model_refs), device_ids)


def build_live_runtime(settings, usage_sink=None):  # noqa: ANN001, ANN201
    """A ``LiveRuntime`` over the database's fleet and the local executor (not started)."""
    from control.core.assembly import CoreBlueprint
    from control.executor.host import ExecutorConfig, LocalExecutor
    from control.executor.host.devices import discover_devices
    from control.executor.protocol import ModelRef
    from control.runtime.live import LiveRuntime, RuntimeConfig
    from control.runtime.state import IndexSpec
    from control.services.fleet_state import load_fleet_state
    from db.session import make_engine, make_session_factory, session_scope

    factory = make_session_factory(make_engine(settings.resolved_database_url()))
    with session_scope(factory) as session:
        fleet = load_fleet_state(session, include_declared=False)
    found = discover_devices(settings.cpu_worker_slots, None, True)
    config = ExecutorConfig(
        cache_dir=str(settings.var_dir / "models"),
        torch_threads=settings.torch_threads,
        poll_queue=False,
    )
    executor = LocalExecutor(config, found)
    local = {d.device_id for d in found}
    devices = tuple(d for d in fleet.devices if d.device_id in local)
    known = {m.key for m in fleet.models}
    # Workflows that need a declared-only model cannot run here (the twin still has them).
    workflows = tuple(
        w for w in fleet.workflows if all(n.model in known for n in w.nodes if n.model)
    )
    blueprint = CoreBlueprint(devices, fleet.models, workflows, fleet.tenancy, fleet.cost)
    names = {
        str(n.params.get("index")) for w in workflows for n in w.nodes if n.tool == "vector_search"
    }
    docs = _index_documents()
    embed = ModelRef("index-embed", "embed", "minilm")
    indexes = tuple(IndexSpec(n, docs[n], embed) for n in sorted(names) if n in docs)
    placement = _placement(fleet, [d.device_id for d in devices])
    return LiveRuntime(blueprint, fleet.latency_model(), executor, fleet.model_refs, placement,
                       RuntimeConfig(indexes=indexes), usage_sink)  # fmt: skip


async def _serve(log_every_s: float) -> None:
    from control.config import get_settings

    runtime = build_live_runtime(get_settings())
    await runtime.start()
    log.info("serving on %d device(s)", len(runtime.blueprint.devices))
    last = 0
    try:
        while True:
            await asyncio.sleep(log_every_s)
            counters = runtime.snapshot().counters
            done = sum(
                v for k, v in counters.items() if k.startswith("runs.") and k != "runs.started"
            )
            log.info("%.1f runs/s (%d finished, %d running)", (done - last) / log_every_s, done,
                     len(runtime.runs))  # fmt: skip
            last = done
    finally:
        await runtime.stop()


def serve(
    log_every: Annotated[float, typer.Option(help="seconds between throughput lines")] = 10.0,
) -> None:
    """Run the live driver with the executor on the local devices until interrupted."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    try:
        asyncio.run(_serve(log_every))
    except KeyboardInterrupt:
        typer.echo("stopped")


def register(app: typer.Typer) -> None:
    """Add ``serve`` to the ``legato`` command."""
    app.command("serve")(serve)
