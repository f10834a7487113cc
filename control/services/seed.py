"""``legato seed --demo``: write the demo fleet of :mod:`control.services.demo_fleet`.

Idempotent: every entity is looked up by its unique name first and only created when missing,
so a second run writes nothing (not even an audit record). Each creation goes through the
audited services, so the audit log shows what the seed did, with the actor ``seed``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from control.config import Settings
from control.executor import precisions as precision
from control.services import Services, build_services
from control.services import demo_fleet as demo
from control.services.workflow_validation import make_spec_validator
from db.migrate import upgrade
from db.session import make_engine, make_session_factory

ACTOR = "seed"


@dataclass
class SeedSummary:
    """What one seed run created and what it found already there, per entity kind."""

    created: dict[str, int] = field(default_factory=dict)
    existing: dict[str, int] = field(default_factory=dict)

    def note(self, kind: str, was_created: bool) -> None:
        bucket = self.created if was_created else self.existing
        bucket[kind] = bucket.get(kind, 0) + 1

    def as_dict(self) -> dict[str, Any]:
        return {"created": dict(self.created), "existing": dict(self.existing)}


def _ensure(summary: SeedSummary, kind: str, found: list, create: Callable[[], Any]) -> Any:
    """Return the existing record (first of ``found``) or the one ``create`` makes."""
    if found:
        summary.note(kind, False)
        return found[0]
    summary.note(kind, True)
    return create()


def seed_demo(database_url: str, settings: Settings, *, local_devices: list | None = None) -> dict:
    """Upgrade the schema, then seed the demo. ``local_devices`` overrides discovery (tests)."""
    upgrade(database_url)
    engine = make_engine(database_url)
    try:
        factory = make_session_factory(engine)
        services = build_services(factory, workflow_validator=make_spec_validator(factory))
        if local_devices is None:
            from control.executor.host.devices import discover_devices

            local_devices = discover_devices(cpu_slots=settings.cpu_worker_slots)
        summary = SeedSummary()
        devices = _seed_fleet(services, summary, local_devices)
        models = _seed_models(services, summary, len(local_devices))
        _seed_tenancy(services, summary)
        _seed_workflows(services, summary)
        _seed_placement(services, summary, devices, models)
        _seed_traces(services, summary)
        return summary.as_dict()
    finally:
        engine.dispose()


def _seed_fleet(services: Services, summary: SeedSummary, local_devices: list) -> dict[str, Any]:
    devices: dict[str, Any] = {}
    local = _ensure(summary, "nodes", services.nodes.list(name=demo.LOCAL_NODE),
                    lambda: services.nodes.create(ACTOR, name=demo.LOCAL_NODE,
                                                  labels={"real": True}))  # fmt: skip
    for i, info in enumerate(local_devices):
        # with three or more, the last real device is the cold pool: loads land there
        cold = len(local_devices) >= 3 and i == len(local_devices) - 1
        labels = {"site": "local", "pool": "cold"} if cold else {"site": "local"}
        precisions = precision.runnable_on(info.kind)
        devices[info.device_id] = _ensure(
            summary, "devices", services.devices.list(name=info.device_id),
            lambda info=info, precisions=precisions, labels=labels: services.devices.create(
                ACTOR, name=info.device_id, node_id=local.id, kind=info.kind,
                accelerator="cpu" if info.kind == "cpu" else "cuda",
                memory_mib=info.memory_budget_mib, precisions=precisions,
                interconnect_group=f"{demo.LOCAL_NODE}-{info.kind}", is_real=True,
                labels=labels),
        )  # fmt: skip
    for node_spec in demo.DECLARED_NODES:
        node = _ensure(summary, "nodes", services.nodes.list(name=node_spec.name),
                       lambda n=node_spec: services.nodes.create(ACTOR, name=n.name,
                                                                 labels=n.labels))  # fmt: skip
        for i in range(node_spec.count):
            name = f"{node_spec.name}-{i}"
            devices[name] = _ensure(
                summary, "devices", services.devices.list(name=name),
                lambda n=node_spec, name=name, node=node: services.devices.create(
                    ACTOR, name=name, node_id=node.id, kind="declared", accelerator=n.accelerator,
                    memory_mib=n.memory_mib, precisions=list(n.precisions),
                    interconnect_group=n.interconnect_group, is_real=False, labels=n.labels),
            )  # fmt: skip
    return devices


def _seed_models(services: Services, summary: SeedSummary, devices: int) -> dict[str, Any]:
    models = {}
    for spec in demo.DEMO_MODELS:
        models[spec.key] = _ensure(
            summary, "models", services.models.list(name=spec.name, version=spec.version),
            lambda s=spec: services.models.create(
                ACTOR, name=s.name, version=s.version, task=s.task,
                weights_source=s.weights_source, weights_location=s.weights_location,
                memory_mib=s.memory_mib, precisions=list(s.precisions),
                max_batch_size=s.max_batch_size, max_batch_tokens=s.max_batch_tokens,
                tp_degree=s.tp_degree, cost_weight_milli=s.cost_weight_milli,
                continuous_batching=s.continuous_batching,
                prefill_chunk_tokens=s.prefill_chunk_tokens, **_autoscaling(s.key, devices)),
        )  # fmt: skip
    return models


def _autoscaling(key: str, devices: int) -> dict[str, Any]:
    """The demo's autoscaling settings of a model: room for the placed replicas (one per real
    device, one on the declared GPUs) and one more."""
    if key not in demo.DEMO_AUTOSCALING:
        return {}
    return {**demo.DEMO_AUTOSCALING[key], "max_replicas": devices + 2}


def _seed_tenancy(services: Services, summary: SeedSummary) -> None:
    cohort = _ensure(summary, "cohorts", services.cohorts.list(name=demo.DEMO_COHORT),
                     lambda: services.cohorts.create(ACTOR, name=demo.DEMO_COHORT,
                                                     description="demo tenants"))  # fmt: skip
    for t in demo.DEMO_TENANTS:
        tenant = _ensure(
            summary,
            "tenants",
            services.tenants.list(name=t["name"]),
            lambda t=t: services.tenants.create(ACTOR, cohort_id=cohort.id, **t),
        )
        for q in demo.DEMO_QUOTAS.get(t["name"], ()):
            _ensure(summary, "quotas",
                    services.quotas.list(tenant_id=tenant.id, resource=q["resource"]),
                    lambda q=q, tenant=tenant: services.quotas.create(
                        ACTOR, tenant_id=tenant.id, **q))  # fmt: skip
    h = demo.DEMO_HEADROOM
    _ensure(
        summary,
        "headroom",
        services.headroom.list(name=h["name"]),
        lambda: services.headroom.create(ACTOR, **h),
    )


def _seed_workflows(services: Services, summary: SeedSummary) -> None:
    for spec in demo.DEMO_WORKFLOWS:
        name = spec["workflow"]
        _ensure(summary, "workflows", services.workflows.list(name=name, version="1"),
                lambda spec=spec, name=name: services.workflows.create(
                    ACTOR, name=name, version="1", spec=spec, status="active"))  # fmt: skip


def _seed_placement(
    services: Services, summary: SeedSummary, devices: dict[str, Any], models: dict[str, Any]
) -> None:
    """An active plan: every real model on every real device (hot); the declared models on the
    declared fleet as the seeds' RAG case lays them out (70B LLM with TP 2 in one NVLink domain,
    embedding and reranker together on one GPU)."""
    if services.plans.list(status="active"):
        summary.note("placement_plans", False)
        return
    plan = services.plans.create(ACTOR, status="draft", author=ACTOR,
                                 note="demo: real models on local devices, RAG layout on the "
                                      "declared GPUs")  # fmt: skip
    real = [d for d in devices.values() if d.is_real and d.labels.get("pool") != "cold"]
    rows: list[tuple[str, list[int], str]] = []
    for spec in demo.DEMO_MODELS:
        if spec.weights_source == "declared":
            continue
        rows += [(spec.key, [d.id], "local replica") for d in real]
    rows += [
        ("llama-70b:1", [devices["gpu-a-0"].id, devices["gpu-a-1"].id],
         "70B LLM, tensor parallel 2 inside NVLink domain nvlink-a"),
        ("minilm-embed:1", [devices["gpu-a-2"].id], "embedding batched beside the reranker"),
        ("minilm-rerank:1", [devices["gpu-a-2"].id], "reranker beside the embedding"),
    ]  # fmt: skip
    for key, device_ids, reason in rows:
        services.placements.create(
            ACTOR,
            plan_id=plan.id,
            model_id=models[key].id,
            device_ids=device_ids,
            replicas=1,
            pool="hot",
            reason=reason,
        )
    services.plans.activate(ACTOR, plan.id)
    summary.note("placement_plans", True)


def _seed_traces(services: Services, summary: SeedSummary) -> None:
    from sim.traces.azure import read_azure_csv
    from sim.traces.mooncake import read_mooncake_jsonl
    from sim.traces.records import SHIPPED

    shipped = {
        "azure_code": ("azure", read_azure_csv,
                       "Azure LLM inference trace 2023 (code), CC-BY-4.0; Patel et al., Splitwise, ISCA 2024"),
        "mooncake_conversation": ("mooncake", read_mooncake_jsonl,
                                  "Mooncake FAST'25 conversation trace, Apache-2.0; Qin et al., FAST 2025"),
    }  # fmt: skip
    for name, (fmt, reader, attribution) in shipped.items():
        path = SHIPPED[name]
        _ensure(summary, "traces", services.traces.list(name=name),
                lambda name=name, fmt=fmt, reader=reader, attribution=attribution, path=path:
                services.traces.create(ACTOR, name=name, format=fmt, path=str(path),
                                       num_rows=len(reader(path)), attribution=attribution))  # fmt: skip
