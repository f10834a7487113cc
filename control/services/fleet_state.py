"""The fleet as the decision core and the executor see it, read from the control-plane store.

``load_fleet_state`` turns database rows into core value types (devices, models, workflows,
tenancy configuration, the active placement, latency tables, the cost model) and, for models
whose weights are local, the executor's ``ModelRef``. The live driver, the twin's scenario builder
and the API all start from this one function, so they see the same fleet.

Naming: a device's ``name`` is its id everywhere (``cpu:0``, ``cuda:1``, ``gpu-a-2``); a model's
core key is ``name:version``, a precision variant's ``name:version@precision``
(:mod:`control.services.variant_catalog`); a workflow's core key is ``name:version`` too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from control.core.dag.spec import DagSpec, dag_from_dict
from control.core.latency import DecodeRow, LatencyRow, LoadRow, TableLatencyModel
from control.core.tenancy.base import TenancyConfig
from control.core.tenancy.cost import CostModel, ModelCostWeight
from control.core.types import DeviceSpec, ModelSpec
from control.executor.protocol import ModelRef
from control.services.model_sources import PACKAGE_SOURCE_KINDS
from control.services.variant_catalog import profile_key, with_variants
from control.store.tenancy_snapshot import load_tenancy_config
from db import models as m

#: Weight sources whose models the local executor can load.
LOADABLE_SOURCES = ("package", "path")


@dataclass(frozen=True)
class PlannedReplica:
    """One placement row of the active plan, in core names."""

    model_key: str
    device_ids: tuple[str, ...]
    replicas: int
    pool: str  # hot | cold


@dataclass(frozen=True)
class FleetState:
    devices: tuple[DeviceSpec, ...]
    models: tuple[ModelSpec, ...]
    workflows: tuple[DagSpec, ...]
    tenancy: TenancyConfig
    placement: tuple[PlannedReplica, ...]
    latency_rows: tuple[LatencyRow, ...]
    decode_rows: tuple[DecodeRow, ...]
    load_rows: tuple[LoadRow, ...]
    cost: CostModel
    model_refs: dict[str, ModelRef] = field(default_factory=dict)  # loadable models only
    real_devices: frozenset[str] = frozenset()
    #: device id -> the precisions it runs (``Device.precisions``; absent or empty: any)
    device_precisions: dict[str, frozenset[str]] = field(default_factory=dict)

    def latency_model(self) -> TableLatencyModel:
        """A latency model over the measured rows (defaults where nothing is measured)."""
        return TableLatencyModel(self.latency_rows, self.decode_rows, self.load_rows)


def model_key(row: m.ServedModel) -> str:
    return f"{row.name}:{row.version}"


def device_spec(row: m.Device, node_name: str) -> DeviceSpec:
    """Core view of a device row. Labels may say ``pool: cold`` to put it in the cold pool."""
    labels = row.labels or {}
    return DeviceSpec(
        device_id=row.name,
        node_id=node_name,
        kind="cpu" if row.kind == "cpu" else "gpu",
        accelerator=row.accelerator or row.kind,
        memory_mib=row.memory_mib,
        interconnect_group=row.interconnect_group or node_name,
        pool="cold" if labels.get("pool") == "cold" else "hot",
        status=row.status,
    )


def model_spec(row: m.ServedModel) -> ModelSpec | None:
    """Core view of a model row; None for tasks the core does not batch (tools)."""
    if row.task == "tool":
        return None
    return ModelSpec(
        name=row.name,
        version=row.version,
        task=row.task,
        memory_mib=row.memory_mib,
        load_time_s=(row.load_time_ms or 2000) / 1000.0,
        max_batch_size=row.max_batch_size,
        max_batch_tokens=row.max_batch_tokens,
        tp_degree=row.tp_degree,
        continuous_batching=_continuous(row),
        prefill_chunk_tokens=_chunk_tokens(row),
        min_replicas=row.min_replicas or 0,
        max_replicas=row.max_replicas,
        scale_out_delay_s=_seconds(row.scale_out_delay_ms),
        idle_s=_seconds(row.idle_ms),
    )


def _seconds(ms: int | None) -> float | None:
    return None if ms is None else ms / 1000.0


def _continuous(row: m.ServedModel) -> bool:
    # the operator's stored choices; the model service keeps them consistent, and these tests
    # keep a row written around the service from failing ModelSpec's checks
    return bool(row.continuous_batching) and row.task == "generate"


def _chunk_tokens(row: m.ServedModel) -> int:
    return max(0, row.prefill_chunk_tokens or 0) if _continuous(row) else 0


def model_ref(row: m.ServedModel) -> ModelRef | None:
    """Executor reference for a model with local weights; None for declared ones."""
    if row.weights_source not in LOADABLE_SOURCES or row.task == "tool":
        return None
    # the generate adapter chunks its prefills exactly when the core plans for it
    chunk = _chunk_tokens(row)
    options = {"prefill_chunk_tokens": chunk} if chunk else {}
    if row.weights_source == "package":
        source = PACKAGE_SOURCE_KINDS.get(row.weights_location)
        if source is None:
            return None
        return ModelRef(
            name=model_key(row), task=row.task, source=source, options=options,
            expected_mib=row.memory_mib,
        )  # fmt: skip
    return ModelRef(
        name=model_key(row), task=row.task, source="hf", path=row.weights_location,
        options=options, expected_mib=row.memory_mib,
    )  # fmt: skip


def workflow_spec(row: m.Workflow) -> DagSpec:
    """The stored DAG spec, keyed ``name:version`` in the core."""
    raw: dict[str, Any] = dict(row.spec)
    raw["workflow"] = f"{row.name}:{row.version}"
    return dag_from_dict(raw)


def load_fleet_state(session: Session, *, include_declared: bool = True) -> FleetState:
    """Read the whole fleet in one session. ``include_declared=False`` keeps only the devices
    and models the local executor can really run (the live driver's view)."""
    nodes = {n.id: n.name for n in session.query(m.Node)}
    device_rows = [d for d in session.query(m.Device).order_by(m.Device.id)]
    if not include_declared:
        device_rows = [d for d in device_rows if d.is_real]
    devices = tuple(device_spec(d, nodes[d.node_id]) for d in device_rows)
    model_rows = [
        r for r in session.query(m.ServedModel).order_by(m.ServedModel.id) if r.status == "active"
    ]
    refs = {model_key(r): ref for r in model_rows if (ref := model_ref(r)) is not None}
    if not include_declared:
        model_rows = [r for r in model_rows if model_key(r) in refs]
    specs = {r.id: s for r in model_rows if (s := model_spec(r)) is not None}
    weights = {model_key(r): _weight(r) for r in model_rows}
    variants = with_variants(session, specs, refs, weights)  # fills refs and weights
    models = (*specs.values(), *variants)
    workflows = tuple(
        workflow_spec(w)
        for w in session.query(m.Workflow).order_by(m.Workflow.id)
        if w.status == "active"
    )
    return FleetState(
        devices=devices,
        models=models,
        workflows=workflows,
        tenancy=load_tenancy_config(session),
        placement=_active_placement(session, {d.id: d.name for d in device_rows}),
        latency_rows=_latency_rows(session),
        decode_rows=_decode_rows(session),
        load_rows=_load_rows(model_rows, devices),
        cost=CostModel(weights),
        model_refs=refs,
        real_devices=frozenset(d.name for d in device_rows if d.is_real),
        device_precisions={d.name: frozenset(d.precisions or ()) for d in device_rows},
    )


def _load_rows(
    model_rows: list[m.ServedModel], devices: tuple[DeviceSpec, ...]
) -> tuple[LoadRow, ...]:
    """A model's measured load time, stated for every device type of the fleet (the store
    keeps one figure per model, measured on the local devices)."""
    types = sorted({d.accelerator for d in devices})
    return tuple(
        LoadRow(model_key(r), t, r.load_time_ms * 1000)
        for r in model_rows
        if r.load_time_ms
        for t in types
    )


def _weight(row: m.ServedModel) -> ModelCostWeight:
    return ModelCostWeight(input_milli=row.cost_weight_milli, output_milli=row.cost_weight_milli)


def _active_placement(session: Session, device_names: dict[int, str]) -> tuple[PlannedReplica, ...]:
    plan = session.query(m.PlacementPlan).filter_by(status="active").one_or_none()
    if plan is None:
        return ()
    models = {r.id: model_key(r) for r in session.query(m.ServedModel)}
    out = []
    for p in session.query(m.Placement).filter_by(plan_id=plan.id).order_by(m.Placement.id):
        names = tuple(device_names[i] for i in p.device_ids if i in device_names)
        if names:
            key = profile_key(models[p.model_id], p.variant)
            out.append(PlannedReplica(key, names, p.replicas, p.pool))
    return tuple(out)


def _profile_rows(session: Session) -> list[tuple[str, m.ModelLatencyProfile]]:
    models = {r.id: model_key(r) for r in session.query(m.ServedModel)}
    return [
        (profile_key(models[p.model_id], p.variant), p)
        for p in session.query(m.ModelLatencyProfile).order_by(m.ModelLatencyProfile.id)
    ]


def _latency_rows(session: Session) -> tuple[LatencyRow, ...]:
    return tuple(
        LatencyRow(key, p.device_type, p.batch_size, p.num_tokens, p.latency_us)
        for key, p in _profile_rows(session)
    )


def _decode_rows(session: Session) -> tuple[DecodeRow, ...]:
    """Decode figures: per generated token, a fixed part (batch 1) plus a per-sequence part
    fitted from the largest measured batch."""
    by_model: dict[tuple[str, str], dict[int, int]] = {}
    for key, p in _profile_rows(session):
        if p.decode_us_per_token:
            by_model.setdefault((key, p.device_type), {})[p.batch_size] = p.decode_us_per_token
    rows = []
    for (key, dtype), per_batch in sorted(by_model.items()):
        b1 = per_batch.get(min(per_batch))
        bmax = max(per_batch)
        per_seq = max(0, (per_batch[bmax] - b1) // max(1, bmax - 1)) if bmax > 1 else 0
        rows.append(DecodeRow(key, dtype, max(1, b1 - per_seq), per_seq))
    return tuple(rows)
