"""A real control-plane stack for the console's tests and benchmark: a SQLite database seeded
with the demo fleet, the real FastAPI app over it, served by uvicorn on a loopback port.

In-process (``serve_in_thread``) for AppTest; as a subprocess (``python -m tests.app.stack``) for
the browser test and ``bench/console.py``. ``--live`` adds the live runtime with tiny random
models on one CPU worker, so the live snapshot and tenant runs work too.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn

from control.api.settings import GatewayConfig
from control.api.twin import TwinEngine
from control.config import Settings
from control.executor.protocol import DeviceInfo, ModelRef
from control.services import build_services
from control.services.plan_observer import PlanWatchConfig
from control.services.plan_simulation import PlanSimulator
from control.services.seed import seed_demo
from control.services.workflow_validation import make_spec_validator
from control.wiring.gateway import gateway_app
from control.wiring.live import LiveOptions
from db.session import make_engine, make_session_factory

PEPPER = b"console-test-pepper"
LOCAL = [DeviceInfo("cpu:0", "cpu", 0, 2048, 0)]
TINY = {
    "tiny-embed:1": ModelRef("tiny-embed:1", "embed", "tiny", "bert"),
    "tiny-gen:1": ModelRef("tiny-gen:1", "generate", "tiny", "gpt2"),
}
TINY_FLOW = {
    "inputs": {"prompt": "text"},
    "outputs": {"text": "gen.text"},
    "nodes": [
        {"id": "gen", "task": "generate", "model": "tiny-gen:1", "params": {"max_tokens": 4}}
    ],
    "edges": [{"from": "input.prompt", "to": "gen.prompt"}],
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def seed(url: str, extra_tenants: int = 0, live: bool = False) -> None:
    """The demo fleet, plus ``extra_tenants`` tenants (t000, t001...) and, for a live stack,
    the tiny models and a one-node workflow ``tiny`` that runs on them."""
    seed_demo(url, Settings(), local_devices=LOCAL)
    services = build_services(make_session_factory(make_engine(url)), key_pepper=PEPPER)
    for i in range(extra_tenants):
        services.tenants.create("test", name=f"t{i:03d}", weight=1 + i % 3)
    if live:
        for key, ref in TINY.items():
            name, version = key.split(":")
            services.models.create("test", name=name, version=version, task=ref.task,
                                   weights_source="declared", weights_location="tiny test model",
                                   memory_mib=16, max_batch_size=8, max_batch_tokens=4096)  # fmt: skip
        services.workflows.create("test", name="tiny", version="1", spec=TINY_FLOW, status="active")


def _live_executor(cache: Path) -> Any:
    from control.executor import sources
    from control.executor.host import ExecutorConfig, LocalExecutor

    for arch in ("gpt2", "bert"):
        sources.ensure_tiny(arch, cache)
    return LocalExecutor(
        ExecutorConfig(heartbeat_s=0.5, cache_dir=str(cache), use_cuda=False, poll_queue=False),
        LOCAL,
    )


def _live_options() -> Any:
    from control.runtime.live import InitialReplica, RuntimeConfig
    from control.runtime.state import IndexSpec
    from control.wiring.live import LiveOptions

    runtime = RuntimeConfig(sample_every_s=0.5,
                            indexes=(IndexSpec("demo-docs", ("a", "b"), TINY["tiny-embed:1"]),))  # fmt: skip
    placement = [InitialReplica("tiny-gen:1", "cpu:0"), InitialReplica("tiny-embed:1", "cpu:0")]
    return LiveOptions(model_refs=TINY, placement=placement, runtime=runtime)


def build_app(
    url: str, token: str, live: bool = False, cache: Path | None = None,
    plan_watch_s: float | None = None,
) -> Any:  # fmt: skip
    """The real app over the database at ``url``; with ``live``, its runtime starts and stops
    with the app and demo bursts are on (as in ``legato up``'s demo); with ``plan_watch_s``,
    each rollout is observed over that many seconds."""
    factory = make_session_factory(make_engine(url))
    validator = make_spec_validator(factory)
    services = build_services(factory, workflow_validator=validator, key_pepper=PEPPER)
    executor = _live_executor(cache or Path("var/models")) if live else None
    simulator = PlanSimulator(factory, url, (cache or Path("var/models")).parent)
    config = GatewayConfig(admin_token=token, sync_timeout_s=60, demo_bursts=live)  # as the demo
    extras: dict[str, Any] = {"plan_simulator": simulator}
    if plan_watch_s is not None:
        extras["plan_watch"] = PlanWatchConfig(window_s=plan_watch_s, poll_s=0.2)
    return gateway_app(services, config, executor,
                       _live_options() if live else LiveOptions(), spec_validator=validator,
                       whatif_engine=TwinEngine(factory, url),
                       extras=extras)  # fmt: skip


@dataclass
class Served:
    url: str
    server: uvicorn.Server
    thread: threading.Thread

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def serve_in_thread(app: Any, start_timeout_s: float = 30.0) -> Served:
    """Serve ``app`` on a free loopback port in a daemon thread; returns once it listens
    (RuntimeError after ``start_timeout_s``)."""
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(int(start_timeout_s / 0.05)):
        if server.started:
            break
        threading.Event().wait(0.05)
    else:
        raise RuntimeError(f"the API server did not start within {start_timeout_s:g} s")
    return Served(f"http://127.0.0.1:{port}", server, thread)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--db", required=True, type=Path)
    parser.add_argument("--port", required=True, type=int)
    parser.add_argument("--token", required=True)
    parser.add_argument("--tenants", type=int, default=0, help="extra tenants to create")
    parser.add_argument("--live", action="store_true", help="run the live runtime (tiny models)")
    parser.add_argument("--plan-watch-s", type=float, default=None,
                        help="observe each rollout over this many seconds (default: not observed)")  # fmt: skip
    args = parser.parse_args()
    url = f"sqlite:///{args.db.resolve()}"
    seed(url, args.tenants, args.live)
    app = build_app(url, args.token, args.live, args.db.parent / "models", args.plan_watch_s)
    asyncio.run(uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=args.port,
                                              log_level="warning")).serve())  # fmt: skip


if __name__ == "__main__":
    main()
