"""The gateway's live path: fleet state -> core blueprint -> ``LiveRuntime`` ->
``InferenceService``, with the parts that hang on them.

:func:`build_live` is the recipe. It first makes the one-model workflows (the runtime learns
its workflows at start), reads the database's real fleet, and then builds, in dependency
order: the :class:`RolloutRecorder` and the :class:`CanaryRecorder` (database only), the
runtime (given their callbacks as ``on_rollout``), the inference service over it (given
``on_settled``), and the live-config feed over that. Nothing is started.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from control.config import get_settings
from control.core.actions import RolloutTransition
from control.core.assembly import CoreBlueprint
from control.core.batching.queue_building import QueueBuildingConfig
from control.core.binding_config import BindingConfig
from control.core.context import CoreConfig
from control.core.tenancy.config import TenancyManagerConfig
from control.core.types import DeviceSpec
from control.executor.protocol import DeviceInfo, Executor, ModelRef
from control.runtime.joins import OnJoined, OnLeft
from control.runtime.live import InitialReplica, LiveRuntime, RuntimeConfig
from control.runtime.state import IndexSpec
from control.runtime.types import UsageRecord
from control.services import Services
from control.services.canary_record import CanaryRecorder, transitions_to
from control.services.demo_fleet import DEMO_DOCUMENTS
from control.services.fleet_state import FleetState, load_fleet_state
from control.services.inference import InferenceService
from control.services.live_config import LiveConfigFeed
from control.services.live_devices import mark_device_left, register_device
from control.services.prompt_prefix import PromptPrefixes
from control.services.rollout_record import RolloutRecorder
from control.services.single_model import ensure_single_model_workflows
from control.store.records import RequestRecord
from control.store.runlog import WriterConfig
from db.session import session_scope

#: The demo vector index the demo workflows search (``params.index``).
DEMO_INDEX = "demo-docs"

#: What the inference service tells of each settled run (the gateway's metrics).
OnSettled = Callable[[str, RequestRecord, tuple[UsageRecord, ...]], None]


def serving_core_config() -> CoreConfig:
    """The core's configuration for serving: queue-building batching
    (:mod:`control.core.batching.queue_building`). A lone request goes at once (it does not
    wait for company that is not coming: a fixed delay adds itself to every request at low
    load), work that waited behind a running batch goes as soon as the replica frees, and a
    free replica waits up to 10 ms for a batch to fill only while requests keep arriving. With
    no delay at all, batches stayed small at the knee of the load curve (MiniLM: mean 4-5,
    where a batch of 16 has twice the throughput of a batch of 4).

    Dispatch ahead (15 ms): when at least half a batch (``BindingConfig.ahead_min_fill``) waits
    while one runs, it is sent to the worker shortly before the running one ends, so the device
    does not idle for the completion's round trip through the driver (~5-15 ms per batch
    measured under load here).

    Explained binds: a step bound late without a routing choice is scored after the fact, so
    the request timeline shows every run's candidates (``BindingConfig.explain``)."""
    return CoreConfig(
        batching="queue_building",
        batching_config=QueueBuildingConfig(max_queue_delay_s=0.010),
        binding=BindingConfig(dispatch_ahead_us=15_000, explain=True),
    )


@dataclass(frozen=True)
class LiveOptions:
    """How to build the live path. ``model_refs`` add or replace executor references (tests
    use tiny models); ``placement`` overrides the initial replicas; ``core_config`` the core's
    policies (default :func:`serving_core_config`) and ``tenancy`` its tenancy half's (the
    fair-share policy); ``writer`` the run log's writer."""

    model_refs: Mapping[str, ModelRef] = field(default_factory=dict)
    placement: Sequence[InitialReplica] | None = None
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    seed: int = 0
    core_config: CoreConfig = field(default_factory=serving_core_config)
    #: the tenancy half's settings (fair share, the strict-priority lead)
    tenancy: TenancyManagerConfig = field(default_factory=TenancyManagerConfig)
    #: the run log's writer: group commit and its fast paths (each one switchable)
    writer: WriterConfig = field(default_factory=WriterConfig)
    #: runs left open by an earlier process older than this are failed, not resumed
    resume_max_age_s: float = 3600.0
    #: bound on a run submitted without a timeout (async, stream): ended ``timed_out`` then
    async_run_timeout_s: float = 600.0


@dataclass(frozen=True)
class LiveParts:
    """The gateway's live parts, built and wired, none started: the inference service (its
    ``runtime`` is the ``LiveRuntime``; start and stop go through it), the recorder the
    runtime reports rollout transitions to, the feed of committed admin changes, and the
    recorder of canary transitions."""

    inference: InferenceService
    rollouts: RolloutRecorder
    live_config: LiveConfigFeed
    #: the generate prompts' tokenization and prefix block hashes (the routes use it)
    prefixes: PromptPrefixes | None = None
    canaries: CanaryRecorder | None = None  # audits the core's canary transitions


def build_live(
    factory: sessionmaker[Session],
    services: Services,
    executor: Executor,
    options: LiveOptions = LiveOptions(),
    *,
    on_settled: OnSettled | None = None,
) -> LiveParts:
    """The live path over the database's real fleet and ``executor`` (not started).
    ``services`` must be over ``factory``; it gains the missing one-model workflows."""
    rollouts = RolloutRecorder(factory, services.plans)
    canaries = CanaryRecorder(factory)
    hook = transitions_to(rollouts.record_transition, canaries.record)
    runtime = build_runtime(factory, services, executor, options, on_rollout=hook)
    inference = InferenceService(
        services,
        runtime,
        factory,
        model_ids={f"{m.name}:{m.version}": m.id for m in services.models.list()},
        device_ids={d.name: d.id for d in services.devices.list()},
        on_settled=on_settled,
        writer=options.writer,
        resume_max_age_s=options.resume_max_age_s,
        async_run_timeout_s=options.async_run_timeout_s,
    )
    runtime.on_device_joined = _registrar(services, inference)
    runtime.on_device_left = _deregistrar(services)
    prefixes = PromptPrefixes(runtime.model_refs, _cache_dir(executor),
                              options.core_config.prefix_block_tokens, inference.catalog)  # fmt: skip
    return LiveParts(inference, rollouts, LiveConfigFeed(factory, inference), prefixes, canaries)


def _cache_dir(executor: Executor) -> Path:
    """Where ``executor``'s workers find converted and tiny models (the gateway reads their
    tokenizers there): its own setting, else the settings' var dir."""
    found = getattr(getattr(executor, "config", None), "cache_dir", None)
    return Path(found) if found else get_settings().var_dir / "models"


def _registrar(services: Services, inference: InferenceService) -> OnJoined:
    """The runtime's ``on_device_joined``: a device the executor found (a cluster node's) goes
    into the device registry (a database thread) and the ledger's device ids."""
    writes: set[asyncio.Task] = set()

    async def register(info: DeviceInfo, spec: DeviceSpec) -> None:
        row_id = await asyncio.to_thread(register_device, services, info, spec)
        inference.device_ids[spec.device_id] = row_id

    def joined(info: DeviceInfo, spec: DeviceSpec) -> None:
        task = asyncio.get_running_loop().create_task(register(info, spec))
        writes.add(task)
        task.add_done_callback(writes.discard)

    return joined


def _deregistrar(services: Services) -> OnLeft:
    """The runtime's ``on_device_left``: a device gone for good (its node left the cluster) is
    set down in the device registry (a database thread)."""
    writes: set[asyncio.Task] = set()

    def left(device_id: str) -> None:
        task = asyncio.get_running_loop().create_task(
            asyncio.to_thread(mark_device_left, services, device_id)
        )
        writes.add(task)
        task.add_done_callback(writes.discard)

    return left


def build_runtime(
    factory: sessionmaker[Session],
    services: Services,
    executor: Executor,
    options: LiveOptions = LiveOptions(),
    *,
    on_rollout: Callable[[RolloutTransition], None] | None = None,
) -> LiveRuntime:
    """A ``LiveRuntime`` (not started) of the database's real fleet: the active models the
    executor can load (``options.model_refs`` added), the workflows made only of those, the
    active plan's replicas (or one of each model round-robin, or ``options.placement``) and
    the demo index when the demo embedding model is loadable."""
    ensure_single_model_workflows(services)
    with session_scope(factory) as session:
        state = load_fleet_state(session, include_declared=False)
    refs = {**state.model_refs, **options.model_refs}
    declared = _all_models(factory)  # options.model_refs may make declared models loadable
    models = tuple(m for m in declared.models if m.key in refs)
    workflows = tuple(w for w in state.workflows if _runnable(w, {m.key for m in models}))
    blueprint = CoreBlueprint(
        devices=state.devices,
        models=models,
        workflows=workflows,
        tenancy=state.tenancy,
        cost=declared.cost,  # their cost weights (and their variants') too
        core_config=options.core_config,
        tenancy_config=options.tenancy,
        seed=options.seed,
    )
    config = options.runtime
    if not config.indexes:
        config = replace(config, indexes=_indexes(refs))
    placement = options.placement
    if placement is None:
        placement = _initial_replicas(state, models, refs)
    return LiveRuntime(blueprint, state.latency_model(), executor, refs, placement, config,
                       on_rollout=on_rollout)  # fmt: skip


def _initial_replicas(
    state: FleetState, models: Sequence[Any], refs: Mapping[str, ModelRef]
) -> tuple[InitialReplica, ...]:
    """The active plan's replicas on real devices, as many of each row as it plans; without a
    plan, one replica of every loadable model, round-robin over the devices."""
    devices = [d.device_id for d in state.devices]
    tp = {m.key: m.tp_degree for m in state.models}
    planned = tuple(
        InitialReplica(p.model_key, p.device_ids[0], p.pool,
                       tp_group(p.device_ids, tp.get(p.model_key, 1)))
        for p in state.placement
        if p.model_key in refs and p.device_ids and p.device_ids[0] in devices
        for _ in range(p.replicas)
    )  # fmt: skip
    if planned:
        return planned
    keys = [m.key for m in models if m.key in refs]
    return tuple(InitialReplica(k, devices[i % len(devices)]) for i, k in enumerate(keys))


def tp_group(device_ids: Sequence[str], tp_degree: int) -> tuple[str, ...]:
    """The devices a start-up replica holds: its placement row's first ``tp_degree`` (the
    core's interconnect group, in row order) when it spans several, else none beyond its first
    (``InitialReplica.group``: never a multi-device replica on its first device alone)."""
    return tuple(device_ids[:tp_degree]) if tp_degree > 1 else ()


def _indexes(refs: Mapping[str, ModelRef]) -> tuple[IndexSpec, ...]:
    embed = refs.get("minilm-embed:1")
    return () if embed is None else (IndexSpec(DEMO_INDEX, DEMO_DOCUMENTS, embed),)


def _all_models(factory: sessionmaker[Session]) -> FleetState:
    """The fleet view of every active model, declared ones included (filtered by refs)."""
    with session_scope(factory) as session:
        return load_fleet_state(session, include_declared=True)


def _runnable(workflow: Any, model_keys: set[str]) -> bool:
    """A workflow the live core can run: every model node names a loadable model."""
    return all(n.model is None or n.model in model_keys for n in workflow.nodes)
