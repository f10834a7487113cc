"""``legato serve``: the live driver with the executor on this machine's devices.

The runtime comes from :func:`control.wiring.serve.build_serve_runtime`: the fleet read once
from the database (without declared devices and models), the active placement (or one replica
of each local model, round-robin over the devices, when no plan is active) and the vector
indexes the workflows name. It runs until interrupted, logging throughput; ``legato api`` puts
the HTTP gateway in front of the same core.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated

import typer

log = logging.getLogger("legato.serve")


async def _serve(log_every_s: float) -> None:
    from control.config import get_settings
    from control.wiring.serve import build_serve_runtime

    runtime = build_serve_runtime(get_settings())
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
