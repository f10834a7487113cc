"""``legato serve``: the live driver and its executor, without HTTP.

The runtime comes from :func:`control.wiring.serve.build_serve_runtime`: the fleet read once
from the database (without declared devices and models), the active placement (or one replica
of each model, round-robin over the devices, when no plan is active) and the vector indexes
the workflows name, over the executor ``--executor`` / ``--ray-address`` select (as for
``legato api``: :mod:`control.commands.executor_flags`). It runs until SIGTERM or SIGINT,
logging throughput; ``legato api`` puts the HTTP gateway in front of the same core.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import TYPE_CHECKING, Annotated

import typer

from control.commands import executor_flags
from control.commands.executor_flags import ExecutorOption, RayAddressOption

if TYPE_CHECKING:
    from control.runtime.live import LiveRuntime

log = logging.getLogger("legato.serve")
#: the signals that stop ``serve`` (a second one cuts the drain short)
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
#: seconds between two looks at the open runs while draining
DRAIN_POLL_S = 0.1


async def _serve(log_every_s: float, drain_s: float) -> None:
    from control.config import get_settings
    from control.wiring.serve import build_serve_runtime

    runtime = build_serve_runtime(get_settings())
    loop = asyncio.get_running_loop()
    stops = asyncio.Queue[signal.Signals]()
    for sig in STOP_SIGNALS:  # installed before the executor starts: ray.init keeps them
        loop.add_signal_handler(sig, stops.put_nowait, sig)
    stopped = asyncio.ensure_future(stops.get())
    starting = asyncio.ensure_future(runtime.start())
    try:
        await asyncio.wait({stopped, starting}, return_when=asyncio.FIRST_COMPLETED)
        if starting.done():
            starting.result()  # a start that failed ends the command with its error
            ready = sum(r.state == "ready" for r in runtime.snapshot().replicas)
            log.info("serving: %d replica(s) ready on %d device(s)", ready,
                     len(runtime.blueprint.devices))  # fmt: skip
            await _log_throughput(runtime, log_every_s, stopped)
        log.info("%s: draining %d open run(s) for at most %.0f s", stopped.result().name,
                 len(runtime.runs), drain_s)  # fmt: skip
        await _drain(runtime, drain_s, stops)
    finally:
        starting.cancel()
        stopped.cancel()
        await runtime.stop()
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)
    log.info("stopped")


async def _log_throughput(runtime: LiveRuntime, every_s: float, stopped: asyncio.Future) -> None:
    """One line of finished runs per second every ``every_s`` until ``stopped`` is done."""
    last = 0
    while True:
        await asyncio.wait({stopped}, timeout=every_s)
        if stopped.done():
            return
        counters = runtime.snapshot().counters
        done = sum(v for k, v in counters.items() if k.startswith("runs.") and k != "runs.started")
        log.info("%.1f runs/s (%d finished, %d running)", (done - last) / every_s, done,
                 len(runtime.runs))  # fmt: skip
        last = done


async def _drain(runtime: LiveRuntime, drain_s: float, stops: asyncio.Queue) -> None:
    """Wait until no run is open, at most ``drain_s`` seconds or until another stop signal."""
    deadline = asyncio.get_running_loop().time() + drain_s
    while runtime.runs and stops.empty():
        if asyncio.get_running_loop().time() >= deadline:
            return
        await asyncio.sleep(DRAIN_POLL_S)


def serve(
    log_every: Annotated[float, typer.Option(help="seconds between throughput lines")] = 10.0,
    drain: Annotated[
        float, typer.Option(help="seconds open runs get to finish when stopping")
    ] = 15.0,
    executor: ExecutorOption = None,
    ray_address: RayAddressOption = None,
) -> None:
    """Run the live driver and its executor until SIGTERM or SIGINT.

    Stopping drains first: open runs get at most ``drain`` seconds (a second signal cuts that
    short); then the runtime and its executor stop. With ``--executor ray`` the devices are the
    actors of a Ray cluster (``--ray-address``, else a local Ray head this process starts and
    stops)."""
    executor_flags.apply(executor, ray_address)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    asyncio.run(_serve(log_every, drain))


def register(app: typer.Typer) -> None:
    """Add ``serve`` to the ``legato`` command."""
    app.command("serve")(serve)
