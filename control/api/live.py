"""Assembly of the live inference path from the database: one-model workflows, the core's
blueprint, the ``LiveRuntime`` and the ``InferenceService`` over it.

Each OpenAI-style route runs a stored one-node workflow (``model.<name>`` at the model's
version), so single-model calls go through the same core, admission and ledger as any DAG.
:func:`ensure_single_model_workflows` creates the missing ones (audited, actor ``gateway``)
before the fleet is read, because the runtime learns its workflows at start.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from control.core.assembly import CoreBlueprint
from control.core.batching.size_delay import SizeDelayConfig
from control.core.binding_config import BindingConfig
from control.core.context import CoreConfig
from control.core.dag.spec import PORTS
from control.executor.protocol import Executor, ModelRef
from control.runtime.live import InitialReplica, LiveRuntime, RuntimeConfig
from control.runtime.state import IndexSpec
from control.services import Services
from control.services.demo_fleet import DEMO_DOCUMENTS
from control.services.fleet_state import FleetState, load_fleet_state
from control.services.inference import InferenceService
from db.session import session_scope

ACTOR = "gateway"
SINGLE_PREFIX = "model."
#: The demo vector index the demo workflows search (``params.index``).
DEMO_INDEX = "demo-docs"

#: Per task: workflow inputs, the node's input edges (workflow input -> node field), outputs.
_ONE_NODE: Mapping[str, tuple[dict[str, str], dict[str, str], dict[str, str]]] = {
    "embed": ({"text": "text"}, {"text": "text"}, {"embedding": "embedding"}),
    "generate": ({"prompt": "text"}, {"prompt": "prompt"}, {"text": "text"}),
    "rerank": (
        {"query": "text", "documents": "documents"},
        {"query": "query", "documents": "documents"},
        {"documents": "documents"},
    ),
    "classify": ({"text": "text"}, {"text": "text"}, {"label": "label"}),
}
#: Rerank returns every document in order; the route cuts ``top_n`` itself.
RERANK_ALL = 10_000


def single_model_name(model_name: str) -> str:
    return f"{SINGLE_PREFIX}{model_name}"


def single_model_spec(model_key: str, task: str) -> dict[str, Any]:
    """The one-node DAG that runs ``model_key`` on the workflow's inputs."""
    inputs, feeds, outputs = _ONE_NODE[task]
    if task == "rerank" and "scores" in PORTS["rerank"][1]:
        # Scores reach the caller only once the core declares the port (the executor's rerank
        # adapter already produces them); until then relevance_score stays null.
        outputs = {**outputs, "scores": "scores"}
    node: dict[str, Any] = {"id": task, "task": task, "model": model_key}
    if task == "rerank":
        node["params"] = {"top_k": RERANK_ALL}
    return {
        "inputs": inputs,
        "outputs": {name: f"{task}.{port}" for name, port in outputs.items()},
        "nodes": [node],
        "edges": [{"from": f"input.{src}", "to": f"{task}.{dst}"} for src, dst in feeds.items()],
    }


def ensure_single_model_workflows(services: Services) -> dict[str, tuple[str, str]]:
    """Create the missing one-model workflows of every active model; returns model key ->
    (workflow name, version). Idempotent: an existing workflow is left as it is."""
    found: dict[str, tuple[str, str]] = {}
    for model in services.models.list(status="active"):
        if model.task not in _ONE_NODE:
            continue
        key = f"{model.name}:{model.version}"
        name = single_model_name(model.name)
        if services.workflows.by_name(name, model.version) is None:
            spec = single_model_spec(key, model.task)
            services.workflows.create(
                ACTOR, name=name, version=model.version, spec=spec, status="active"
            )
        found[key] = (name, model.version)
    return found


def serving_core_config() -> CoreConfig:
    """The core's configuration for serving: no batching delay. A replica that is free takes
    everything queued at once (up to its batch limits); while it runs, new work queues and
    forms the next batch. On one worker per replica that never leaves the device idle with
    work waiting, and a lone request does not wait for company that is not coming (a fixed
    delay adds itself to every request at low load and buys nothing at high load).

    Dispatch ahead (15 ms): when at least half a batch (``BindingConfig.ahead_min_fill``) waits
    while one runs, it is sent to the worker shortly before the running one ends, so the device
    does not idle for the completion's round trip through the driver (~5-15 ms per batch
    measured under load here)."""
    return CoreConfig(
        batching_config=SizeDelayConfig(max_queue_delay_s=0.0),
        binding=BindingConfig(dispatch_ahead_us=15_000),
    )


@dataclass(frozen=True)
class LiveOptions:
    """How to build the live path. ``model_refs`` add or replace executor references (tests
    use tiny models); ``placement`` overrides the initial replicas; ``core_config`` the core's
    policies (default :func:`serving_core_config`)."""

    model_refs: Mapping[str, ModelRef] = field(default_factory=dict)
    placement: Sequence[InitialReplica] | None = None
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    seed: int = 0
    core_config: CoreConfig = field(default_factory=serving_core_config)


def _initial_replicas(
    state: FleetState, models: Sequence[Any], refs: Mapping[str, ModelRef]
) -> tuple[InitialReplica, ...]:
    """The active plan's replicas on real devices; without a plan, one replica of every
    loadable model, round-robin over the devices."""
    devices = [d.device_id for d in state.devices]
    planned = tuple(
        InitialReplica(p.model_key, dev, p.pool)
        for p in state.placement
        if p.model_key in refs
        for dev in p.device_ids[:1]
        if dev in devices
    )
    if planned:
        return planned
    keys = [m.key for m in models if m.key in refs]
    return tuple(InitialReplica(k, devices[i % len(devices)]) for i, k in enumerate(keys))


def _indexes(refs: Mapping[str, ModelRef]) -> tuple[IndexSpec, ...]:
    embed = refs.get("minilm-embed:1")
    return () if embed is None else (IndexSpec(DEMO_INDEX, DEMO_DOCUMENTS, embed),)


def build_inference(
    factory: sessionmaker[Session],
    services: Services,
    executor: Executor,
    options: LiveOptions = LiveOptions(),
) -> InferenceService:
    """An InferenceService over a LiveRuntime of the database's real fleet (not started)."""
    ensure_single_model_workflows(services)
    with session_scope(factory) as session:
        state = load_fleet_state(session, include_declared=False)
    refs = {**state.model_refs, **options.model_refs}
    models = tuple(m for m in _all_models(factory) if m.key in refs)
    workflows = tuple(w for w in state.workflows if _runnable(w, {m.key for m in models}))
    blueprint = CoreBlueprint(
        devices=state.devices,
        models=models,
        workflows=workflows,
        tenancy=state.tenancy,
        cost=state.cost,
        core_config=options.core_config,
        seed=options.seed,
    )
    runtime_config = options.runtime
    if not runtime_config.indexes:
        runtime_config = replace(runtime_config, indexes=_indexes(refs))
    placement = options.placement
    if placement is None:
        placement = _initial_replicas(state, models, refs)
    runtime = LiveRuntime(blueprint, state.latency_model(), executor, refs, placement,
                          runtime_config)  # fmt: skip
    service = InferenceService(
        services,
        runtime,
        factory,
        model_ids={f"{m.name}:{m.version}": m.id for m in services.models.list()},
        device_ids={d.name: d.id for d in services.devices.list()},
    )
    return service


def _all_models(factory: sessionmaker[Session]) -> tuple[Any, ...]:
    """Core model specs of every active model, declared ones included (filtered by refs)."""
    with session_scope(factory) as session:
        return load_fleet_state(session, include_declared=True).models


def _runnable(workflow: Any, model_keys: set[str]) -> bool:
    """A workflow the live core can run: every model node names a loadable model."""
    return all(n.model is None or n.model in model_keys for n in workflow.nodes)
