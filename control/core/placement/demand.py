"""Demand input of placement: per-model arrival rate and service time, and the traffic between
workflow neighbours.

Rates are requests per second and service times seconds: measurements, not accounts, so they
are floats; replica counts derived from them are integers (see ``replicas.py``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from control.core.dag.spec import INPUT_NODE, DagSpec
from control.core.latency import LatencyModel, service_us
from control.core.placement.plan import PlanError

Pair = tuple[str, str]


def pair(a: str, b: str) -> Pair:
    """The unordered pair {a, b} in canonical (sorted) form."""
    return (a, b) if a <= b else (b, a)


@dataclass(frozen=True)
class ModelDemand:
    arrival_rate: float  # requests per second reaching this model
    service_s: float  # mean device time per request (a batch's time / its size)

    def __post_init__(self) -> None:
        for name in ("arrival_rate", "service_s"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise PlanError(f"ModelDemand.{name}={v!r}: must be finite and >= 0")


_NO_MODELS: Mapping[str, ModelDemand] = MappingProxyType({})
_NO_TRAFFIC: Mapping[Pair, float] = MappingProxyType({})


@dataclass(frozen=True)
class Demand:
    """``traffic`` maps an unordered model pair to req/s flowing between them (either order may
    be given; duplicates are summed)."""

    models: Mapping[str, ModelDemand] = field(default_factory=lambda: _NO_MODELS)
    traffic: Mapping[Pair, float] = field(default_factory=lambda: _NO_TRAFFIC)

    def __post_init__(self) -> None:
        merged: dict[Pair, float] = {}
        for (a, b), rate in self.traffic.items():
            if a == b:
                raise PlanError(f"Demand.traffic key={(a, b)!r}: a model is not its own neighbour")
            if not (math.isfinite(rate) and rate >= 0):
                raise PlanError(f"Demand.traffic[{(a, b)!r}]={rate!r}: must be finite and >= 0")
            merged[pair(a, b)] = merged.get(pair(a, b), 0.0) + rate
        object.__setattr__(self, "models", MappingProxyType(dict(self.models)))
        object.__setattr__(self, "traffic", MappingProxyType(merged))

    def of(self, model_key: str) -> ModelDemand:
        """The model's demand; a model not listed has none."""
        return self.models.get(model_key) or ModelDemand(0.0, 0.0)

    def neighbours(self) -> dict[str, dict[str, float]]:
        """Model -> {neighbour: req/s}, both directions, positive traffic only."""
        out: dict[str, dict[str, float]] = {}
        for (a, b), rate in self.traffic.items():
            if rate > 0:
                out.setdefault(a, {})[b] = rate
                out.setdefault(b, {})[a] = rate
        return out


def model_neighbours(spec: DagSpec) -> set[Pair]:
    """Model pairs of a workflow that hand data to each other: joined by an edge, or by a path
    through tool nodes only (embedding -> vector search -> reranker makes the embedding and the
    reranker neighbours)."""
    succ: dict[str, set[str]] = {}
    for e in spec.edges:
        if e.source != INPUT_NODE:
            succ.setdefault(e.source, set()).add(e.target)
    model_of = {n.node_id: n.model for n in spec.nodes if n.model}
    out: set[Pair] = set()
    for start, model in model_of.items():
        stack, seen = list(succ.get(start, ())), set()
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            other = model_of.get(node)
            if other is None:
                stack.extend(succ.get(node, ()))  # a tool: look through it
            elif other != model:
                out.add(pair(model, other))
    return out


def demand_from_workflows(
    specs: Iterable[DagSpec], workflow_rates: Mapping[str, float], service_s: Mapping[str, float]
) -> Demand:
    """Demand from workflows x their request rates: each run reaches every model node of its
    workflow once and crosses every neighbour pair once. ``service_s`` gives each model's mean
    service time (see :func:`mean_service_s`); a model without one gets 0."""
    rates: dict[str, float] = {}
    traffic: dict[Pair, float] = {}
    for spec in specs:
        rate = workflow_rates.get(spec.workflow, 0.0)
        for n in spec.nodes:
            if n.model:
                rates[n.model] = rates.get(n.model, 0.0) + rate
        for p in sorted(model_neighbours(spec)):
            traffic[p] = traffic.get(p, 0.0) + rate
    models = {k: ModelDemand(r, service_s.get(k, 0.0)) for k, r in rates.items()}
    return Demand(models, traffic)


def mean_service_s(
    latency: LatencyModel,
    model_key: str,
    device_type: str,
    batch: int,
    tokens: int,
    out_tokens: int = 0,
) -> float:
    """Mean device seconds per request when requests run in batches of ``batch``."""
    return service_us(latency, model_key, device_type, batch, tokens, out_tokens) / 1e6 / batch
