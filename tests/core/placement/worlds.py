"""Builders of placement worlds: fleets, models, demand (tests and the benchmark use them)."""

from __future__ import annotations

from control.core.placement import ClusterSnapshot, Demand, DeviceEntry, ModelDemand, ModelEntry
from control.core.tenancy.base import HeadroomSpec
from control.core.types import DeviceSpec, ModelSpec


def fleet(
    nodes: int, per_node: int, memory_mib: int = 80_000, domains_per_node: int = 1,
    precisions: frozenset[str] = frozenset(), status: str = "up",
) -> tuple[DeviceEntry, ...]:  # fmt: skip
    """``nodes`` x ``per_node`` devices named n<i>-d<j>; each node split into equal domains."""
    out = []
    size = max(1, per_node // domains_per_node)
    for n in range(nodes):
        for j in range(per_node):
            dom = f"n{n}-nv{j // size}"
            spec = DeviceSpec(f"n{n}-d{j}", f"n{n}", "gpu", "h100", memory_mib, dom, status=status)
            out.append(DeviceEntry(spec, precisions))
    return tuple(out)


def model(
    name: str, memory_mib: int, tp: int = 1, task: str = "embed", precisions: tuple[str, ...] = ()
) -> ModelEntry:
    return ModelEntry(ModelSpec(name, "1", task, memory_mib, tp_degree=tp), precisions)


def headroom(rid: str, device_ids: list[str], milli: int) -> HeadroomSpec:
    return HeadroomSpec(rid, frozenset(device_ids), milli, frozenset({"critical"}), True)


def snap(devices, models, reservations=(), current=None) -> ClusterSnapshot:  # noqa: ANN001
    return ClusterSnapshot(tuple(devices), tuple(models), tuple(reservations), current)


def demand(
    rates: dict[str, tuple[float, float]], traffic: dict[tuple[str, str], float] | None = None
) -> Demand:
    """``rates``: model key -> (req/s, service seconds)."""
    return Demand({k: ModelDemand(r, s) for k, (r, s) in rates.items()}, traffic or {})


#: The RAG pipeline of the seed: embedding -> (search) -> reranker -> LLM on two GPUs.
RAG_MODELS = (
    model("minilm", 2_000, task="embed"),
    model("rerank", 3_000, task="rerank"),
    model("llm", 50_000, tp=2, task="generate"),
)
RAG_TRAFFIC = {("minilm:1", "rerank:1"): 40.0, ("rerank:1", "llm:1"): 40.0}


def rag_demand(rate: float = 40.0) -> Demand:
    return demand(
        {"minilm:1": (rate, 0.004), "rerank:1": (rate, 0.012), "llm:1": (rate, 0.030)},
        {k: rate for k in RAG_TRAFFIC},
    )


def independent_violations(plan, snapshot) -> list[str]:  # noqa: ANN001
    """Memory and domain checks recomputed here, apart from the product's ``violations``."""
    mem = {d.device_id: d.spec.memory_mib for d in snapshot.devices}
    dom = {
        d.device_id: d.spec.interconnect_group or "node:" + d.spec.node_id for d in snapshot.devices
    }
    kept = dict.fromkeys(mem, 0)
    for h in snapshot.headroom:
        for d in h.device_ids:
            kept[d] += -(-mem[d] * h.reserved_milli // 1000)
    models = {m.key: m.spec for m in snapshot.models}
    used = dict.fromkeys(mem, 0)
    bad = []
    for p in plan.placements:
        for d in p.device_ids:
            used[d] += models[p.model_key].memory_mib * p.replicas
        if len({dom[d] for d in p.device_ids}) != 1:
            bad.append(f"{p.model_key} crosses domains {p.device_ids}")
        if len(p.device_ids) != models[p.model_key].tp_degree:
            bad.append(f"{p.model_key} group size {len(p.device_ids)}")
    bad += [f"{d} over memory" for d in mem if used[d] > mem[d] - min(kept[d], mem[d])]
    return bad
