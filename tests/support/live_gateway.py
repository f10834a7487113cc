"""A live gateway for tests over real parts: a copy of the migrated SQLite template, the services
over it (the spec validator and the tests' key pepper), tiny real models and one CPU worker.

Two steps, because a test seeds the fleet (models, workflows, tenants, keys) between them: the
live path reads the fleet when the app is built.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from fastapi import FastAPI

from control.api.settings import GatewayConfig
from control.core.context import CoreConfig
from control.executor import sources
from control.executor.host import ExecutorConfig, LocalExecutor
from control.executor.protocol import DeviceInfo, ModelRef
from control.runtime.live import InitialReplica, RuntimeConfig
from control.services import Services, build_services
from control.services.workflow_validation import make_spec_validator
from control.wiring.gateway import gateway_app
from control.wiring.live import LiveOptions, OnSettled, serving_core_config
from db.session import make_engine, make_session_factory
from tests.api.conftest import ADMIN_TOKEN, PEPPER, client_for

#: The tiny BERT embedder most live tests serve, and a one-node workflow over it.
TINY_EMBED_REFS = {"tiny-embed:1": ModelRef("tiny-embed:1", "embed", "tiny", "bert")}
EMBED_WORKFLOW = {
    "inputs": {"text": "text"},
    "outputs": {"vector": "embed.embedding"},
    "nodes": [{"id": "embed", "task": "embed", "model": "tiny-embed:1"}],
    "edges": [{"from": "input.text", "to": "embed.text"}],
}


def seed_embed_fleet(services: Services, max_batch_size: int = 8,
                     max_batch_tokens: int = 4096) -> None:  # fmt: skip
    """One real CPU device, the tiny embedder (batches of at most ``max_batch_size`` items and
    ``max_batch_tokens`` tokens) and the ``vec`` workflow (``EMBED_WORKFLOW``)."""
    node = services.nodes.create("test", name="local")
    services.devices.create("test", name="cpu:0", node_id=node.id, kind="cpu", memory_mib=2048,
                            precisions=["fp32"], is_real=True)  # fmt: skip
    services.models.create("test", name="tiny-embed", version="1", task="embed",
                           weights_source="declared", weights_location="tiny test model",
                           memory_mib=16, max_batch_size=max_batch_size,
                           max_batch_tokens=max_batch_tokens)  # fmt: skip
    services.workflows.create("test", name="vec", version="1", spec=EMBED_WORKFLOW,
                              status="active")  # fmt: skip


@dataclass(frozen=True)
class LiveWorld:
    """The services of a test database and where its tiny models are cached."""

    services: Services
    validator: object
    cache: Path


def live_world(
    root: Path, template: Path | str, archs: Iterable[str] = ("gpt2", "bert")
) -> LiveWorld:
    """Services over a copy of ``template`` (a migrated SQLite file) in ``root``, or over the
    database at ``template`` when it is a URL (``module_db_url``: SQLite or PostgreSQL), with
    the tiny models of ``archs``."""
    cache = root / "models"
    for arch in archs:
        sources.ensure_tiny(arch, cache)
    if isinstance(template, str):
        url = template
    else:
        shutil.copyfile(template, root / "legato.db")
        url = f"sqlite:///{root / 'legato.db'}"
    factory = make_session_factory(make_engine(url))
    validator = make_spec_validator(factory)
    services = build_services(factory, workflow_validator=validator, key_pepper=PEPPER)
    return LiveWorld(services, validator, cache)


def live_app(
    world: LiveWorld,
    refs: Mapping[str, ModelRef],
    config: GatewayConfig,
    *,
    memory_mib: int = 1024,
    placement: Sequence[InitialReplica] | None = None,
    start_with_app: bool = False,
    devices: Sequence[DeviceInfo] | None = None,
    core_config: CoreConfig | None = None,
    also_settled: OnSettled | None = None,
) -> FastAPI:
    """The gateway app over ``world``'s (seeded) fleet, one CPU worker and the models ``refs``
    (not started unless ``start_with_app``: then its lifespan starts the live path);
    ``devices``: one CPU worker each (default one, ``cpu:0``); ``core_config``: the core's
    policies (default the serving configuration); ``also_settled``: told each settled run."""
    executor = LocalExecutor(
        ExecutorConfig(
            heartbeat_s=1.0, cache_dir=str(world.cache), use_cuda=False, poll_queue=False
        ),  # fmt: skip
        list(devices) if devices else [DeviceInfo("cpu:0", "cpu", 0, memory_mib, 0)],
    )
    options = LiveOptions(model_refs=refs, placement=placement,
                          runtime=RuntimeConfig(sample_every_s=0.5),
                          core_config=core_config or serving_core_config())  # fmt: skip
    return gateway_app(world.services, config, executor, options,
                       spec_validator=world.validator, start_with_app=start_with_app,
                       also_settled=also_settled)  # fmt: skip


@asynccontextmanager
async def embed_clients(
    world: LiveWorld,
    also_settled: OnSettled | None = None,
    core_config: CoreConfig | None = None,
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    """A new tenant's client and the admin's of the started gateway over ``world``'s fleet
    (seed it first: :func:`seed_embed_fleet`), the tiny embedder on one CPU worker; the live
    path is stopped on exit. ``also_settled`` is told each settled run; ``core_config``: the
    core's policies (default the serving configuration)."""
    tenant = world.services.tenants.create("test", name="acme", weight=1).id
    key = world.services.api_keys.create_key("test", tenant).plaintext
    app = live_app(world, TINY_EMBED_REFS, GatewayConfig(admin_token=ADMIN_TOKEN,
                                                          sync_timeout_s=30),
                   also_settled=also_settled, core_config=core_config)  # fmt: skip
    async with started_clients(app, key) as clients:
        yield clients


@asynccontextmanager
async def started_clients(
    app: FastAPI, key: str
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    """The clients of tenant ``key`` and of the admin on ``app``, its live path started;
    both closed and the live path stopped on exit."""
    inference = app.state.gateway.inference
    await inference.start()
    client, admin = client_for(app, key), client_for(app, ADMIN_TOKEN)
    try:
        yield client, admin
    finally:
        await client.aclose()
        await admin.aclose()
        await inference.stop()
