"""Check a plan (generated or edited by hand) against a cluster snapshot.

Returns the violations as sentences; an empty list means the plan respects every hard
constraint: known models and up devices, groups of exactly ``tp_degree`` devices inside one
interconnect domain, a shared precision, device memory minus reserved headroom, and pools
(cold placements only on the plan's cold devices, hot ones never there).
"""

from __future__ import annotations

from control.core.placement.inputs import ClusterSnapshot, precision_for
from control.core.placement.plan import PlacementPlan


def violations(plan: PlacementPlan, snapshot: ClusterSnapshot) -> list[str]:
    """Every broken hard constraint of ``plan`` on ``snapshot``, in a stable order."""
    devices = {d.device_id: d for d in snapshot.devices}
    models = {m.key: m for m in snapshot.models}
    reserved = snapshot.reserved_mib()
    cold = set(plan.cold_devices)
    used: dict[str, int] = {}
    out: list[str] = []
    for p in plan.placements:
        model = models.get(p.model_key)
        if model is None:
            out.append(f"{p.model_key}: unknown model")
            continue
        if len(p.device_ids) != model.spec.tp_degree:
            out.append(
                f"{p.model_key}: group {p.device_ids} has {len(p.device_ids)} devices, tp_degree is {model.spec.tp_degree}"
            )
        known = [devices[d] for d in p.device_ids if d in devices]
        if len(known) != len(p.device_ids):
            out.append(f"{p.model_key}: unknown devices in {p.device_ids}")
        if len({d.domain for d in known}) > 1:
            out.append(f"{p.model_key}: group {p.device_ids} crosses interconnect domains")
        for d in known:
            if d.spec.status != "up":
                out.append(f"{p.model_key}: device {d.device_id} is {d.spec.status}")
            if precision_for(model, d) is None:
                out.append(
                    f"{p.model_key}: device {d.device_id} runs none of {list(model.precisions)}"
                )
            if (d.device_id in cold) != (p.pool == "cold"):
                out.append(
                    f"{p.model_key}: {p.pool} placement on device {d.device_id} (cold pool: {d.device_id in cold})"
                )
            used[d.device_id] = used.get(d.device_id, 0) + model.spec.memory_mib * p.replicas
    for dev_id, mib in sorted(used.items()):
        limit = devices[dev_id].spec.memory_mib - reserved[dev_id]
        if mib > limit:
            out.append(f"device {dev_id}: {mib} MiB placed > {limit} MiB (memory minus headroom)")
    return out
