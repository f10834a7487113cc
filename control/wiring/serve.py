"""``legato serve``'s live driver: a ``LiveRuntime`` over the executor the settings select.

On the local executor it keeps only the database devices found on this machine (unlike the
gateway's path, :mod:`control.wiring.live`). On the Ray executor the devices are the cluster's,
known only once it starts: it keeps the database's devices, as the gateway does, and every
other device of the cluster joins at start (:mod:`control.runtime.joins`); the core's cost of a
cross-node input is the measured one (:func:`control.wiring.executor.measured_transfer`).
Either way it places each planned replica whose first device it keeps (one of each model,
round-robin, when no plan is active) and loads the vector indexes its workflows name.
"""

from __future__ import annotations

from collections.abc import Sequence

from control.api.settings import GatewaySettings
from control.config import Settings
from control.core.assembly import CoreBlueprint
from control.core.tenancy.config import TenancyManagerConfig
from control.executor.protocol import ModelRef
from control.runtime.live import InitialReplica, LiveRuntime, RuntimeConfig
from control.runtime.local_fleet import one_of_each
from control.runtime.state import IndexSpec
from control.services.demo_fleet import DEMO_DOCUMENTS
from control.services.fleet_state import FleetState, load_fleet_state
from control.wiring.executor import build_executor, local_devices, measured_transfer
from control.wiring.live import serving_core_config, tp_group
from control.wiring.policies import policies_from_settings, tenancy_of
from control.wiring.services import session_factory
from db.session import session_scope

#: Documents of the indexes the demo workflows search (``params.index``).
INDEX_DOCUMENTS = {"demo-docs": DEMO_DOCUMENTS}
#: The embedding model every index replica embeds its documents and queries with.
INDEX_EMBED = ModelRef("index-embed", "embed", "minilm")


def build_serve_runtime(settings: Settings) -> LiveRuntime:
    """A ``LiveRuntime`` (not started) over the database's fleet (no declared devices or
    models) and the executor the settings select (the module doc)."""
    factory = session_factory(settings.resolved_database_url())
    with session_scope(factory) as session:
        fleet = load_fleet_state(session, include_declared=False)
    if settings.executor == "ray":
        executor = build_executor(settings)
        devices = fleet.devices
    else:
        found = local_devices(settings)
        executor = build_executor(settings, found)
        local = {d.device_id for d in found}
        devices = tuple(d for d in fleet.devices if d.device_id in local)
    known = {m.key for m in fleet.models}
    # Workflows that need a declared-only model cannot run here (the twin still has them).
    workflows = tuple(
        w for w in fleet.workflows if all(n.model in known for n in w.nodes if n.model)
    )
    policies = policies_from_settings(settings, serving_core_config())
    blueprint = CoreBlueprint(devices, fleet.models, workflows, fleet.tenancy, fleet.cost,
                              core_config=measured_transfer(policies.core, settings),
                              tenancy_config=tenancy_of(policies, _tenancy_base()))  # fmt: skip
    names = {
        str(n.params.get("index")) for w in workflows for n in w.nodes if n.tool == "vector_search"
    }
    indexes = tuple(
        IndexSpec(n, INDEX_DOCUMENTS[n], INDEX_EMBED) for n in sorted(names) if n in INDEX_DOCUMENTS
    )
    placement = _placement(fleet, [d.device_id for d in devices])
    return LiveRuntime(blueprint, fleet.latency_model(), executor, fleet.model_refs, placement,
                       RuntimeConfig(indexes=indexes))  # fmt: skip


def _tenancy_base() -> TenancyManagerConfig:
    """The tenancy half as the gateway's settings set it (``LEGATO_STRICT_PRIORITY_LEAD``),
    so ``legato serve`` and ``legato api`` order strict-priority tenants alike."""
    return TenancyManagerConfig(strict_priority_lead=GatewaySettings().strict_priority_lead)


def _placement(fleet: FleetState, device_ids: Sequence[str]) -> tuple[InitialReplica, ...]:
    """Every planned replica whose first device is kept; else one of each model. None without
    a device: on Ray the cluster's devices join at start, and the core loads on demand."""
    tp = {m.key: m.tp_degree for m in fleet.models}
    planned = [
        InitialReplica(
            p.model_key, p.device_ids[0], p.pool, tp_group(p.device_ids, tp.get(p.model_key, 1))
        )  # fmt: skip
        for p in fleet.placement
        for _ in range(p.replicas)
        if p.model_key in fleet.model_refs and p.device_ids[0] in device_ids
    ]
    if planned or not device_ids:
        return tuple(planned)
    return one_of_each(sorted(fleet.model_refs), device_ids)
