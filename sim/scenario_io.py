"""Scenarios from plain dicts (YAML/JSON files, the database, API bodies) and variants of them.

The dict keys are the field names of the core's value types, so a row read from the database and
a line of a scenario file say the same thing: ``devices`` (DeviceSpec fields), ``models``
(ModelSpec fields plus ``cost_milli`` and ``variants``, its precision variants: see
:mod:`sim.scenario_variants`), ``workflows`` (DAG spec dicts), ``placement``
(``model_key``, ``device_ids``, ``replicas``, ``pool``), ``tenants`` / ``quotas`` / ``headroom``
(TenantSpec / QuotaSpec / HeadroomSpec fields; headroom ``device_ids: "*"`` is every device),
``latency`` (inline ``tables`` and ``published`` slices: ``splitwise`` or ``public``, see
``sim/profiles/README.md``), ``core`` and ``tenancy_manager`` (policy knobs, strategies by
registered name), ``interconnects`` (how moving a step's inputs is priced: a name of
:data:`~control.core.routing.interconnects.INTERCONNECTS`, or TransferCosts fields with an
optional ``preset`` name under them; shorthand for ``core.transfer``, which the twin charges
too), ``executor``, ``workload``, ``fleet_events``, ``seeds``. A variant is a dict of the same
shape: the sections it names replace the baseline's
(``core``, ``tenancy_manager``, ``executor`` and ``workload`` are merged key by key).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from control.core.batching.registry import BATCHING
from control.core.context import CoreConfig
from control.core.dag.spec import dag_from_dict
from control.core.latency import DecodeRow, LatencyRow, LoadRow
from control.core.registry import PolicyRegistry
from control.core.routing.interconnects import interconnect
from control.core.routing.registry import ROUTING
from control.core.routing.transfer import TransferCosts
from control.core.tenancy.base import HeadroomSpec, QuotaSpec, TenancyConfig, TenantSpec
from control.core.tenancy.config import TenancyManagerConfig
from control.core.tenancy.cost import CostModel, ModelCostWeight
from control.core.tenancy.fairshare.registry import FAIR_SHARE_POLICIES
from control.core.types import DeviceSpec, ModelSpec
from sim.driver import FleetEvent
from sim.executor import SimExecutorConfig
from sim.profiles.public import PublicProfile, public_profile
from sim.profiles.splitwise import splitwise_rows
from sim.scenario import LatencyTables, PlacedReplica, Scenario, Workload
from sim.scenario_variants import VariantError, expand_variants, with_variant_rows

#: Sections a variant merges key by key instead of replacing.
MERGED_SECTIONS = ("core", "tenancy_manager", "executor", "workload")
SHIPPED_DIR = Path(__file__).with_name("scenarios")


class ScenarioError(ValueError):
    """A scenario dict that cannot be built; the message names the section and the value."""


def read_scenario_dict(path: Path | str) -> dict[str, Any]:
    """A scenario file (YAML or JSON) as a dict; a bare name means a shipped scenario."""
    p = Path(path)
    if not p.exists() and (SHIPPED_DIR / f"{path}.yaml").exists():
        p = SHIPPED_DIR / f"{path}.yaml"
    text = p.read_text()
    raw = json.loads(text) if p.suffix == ".json" else yaml.safe_load(text)
    if not isinstance(raw, dict):
        raise ScenarioError(f"{p}: expected a mapping at the top level")
    return raw


def load_scenario(path: Path | str) -> Scenario:
    return scenario_from_dict(read_scenario_dict(path))


def apply_variant(base: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with the sections of ``changes`` replacing (or merging into) its own."""
    out = copy.deepcopy(dict(base))
    for key, value in changes.items():
        if key in MERGED_SECTIONS and isinstance(value, Mapping):
            out[key] = {**dict(out.get(key) or {}), **copy.deepcopy(dict(value))}
        else:
            out[key] = copy.deepcopy(value)
    return out


def _build(section: str, kind: type, raw: Any) -> Any:
    try:
        return kind(**raw)
    except (TypeError, ValueError) as exc:
        raise ScenarioError(f"{section}: {raw!r}: {exc}") from None


def _tenancy(raw: Mapping[str, Any], device_ids: list[str]) -> TenancyConfig:
    tenants = tuple(_build("tenants", TenantSpec, t) for t in raw.get("tenants") or ())
    quotas = tuple(_build("quotas", QuotaSpec, q) for q in raw.get("quotas") or ())
    headroom = []
    for h in raw.get("headroom") or ():
        h = dict(h)
        ids = h.get("device_ids", "*")
        h["device_ids"] = frozenset(device_ids if ids == "*" else ids)
        h["allowed_classes"] = frozenset(h.get("allowed_classes") or ())
        headroom.append(_build("headroom", HeadroomSpec, h))
    return TenancyConfig(tenants, quotas, tuple(headroom))


def _latency(raw: Mapping[str, Any], accelerators: list[str]) -> LatencyTables:
    rows, decode, loads, sources = [], [], [], []
    for t in raw.get("tables") or ():
        m, acc = t["model"], t["accelerator"]
        rows += [LatencyRow(m, acc, int(b), int(n), int(us)) for b, n, us in t.get("rows") or ()]
        if t.get("decode"):
            decode.append(DecodeRow(m, acc, int(t["decode"][0]), int(t["decode"][1])))
        if t.get("load_us"):
            loads.append(LoadRow(m, acc, int(t["load_us"])))
        sources.append(f"{m} on {acc}: {t.get('source', 'inline table')}")
    for p in raw.get("published") or ():
        if p.get("table") == "public":
            prof = _public(p)
            rows += prof.rows
            decode += prof.decode
            sources.append(f"{p['as_model']} on {p['as_accelerator']}: {prof.source}")
            continue
        if p.get("table") != "splitwise":
            raise ScenarioError(f"latency.published: unknown table {p.get('table')!r}")
        r, d = splitwise_rows(
            p["model"], p["hardware"], int(p["tp"]), p["as_model"], p["as_accelerator"]
        )
        rows += r
        decode.append(d)
        sources.append(
            f"{p['as_model']} on {p['as_accelerator']}: Splitwise {p['model']}/{p['hardware']}/tp{p['tp']} (MIT)"
        )
    for r in raw.get("rows") or ():  # measured rows as stored (the database path)
        rows.append(LatencyRow(**r))
    for d in raw.get("decode_rows") or ():
        decode.append(DecodeRow(**d))
    for x in raw.get("load_rows") or ():  # "*" rows apply to every accelerator of the fleet
        accs = accelerators if x["device_type"] == "*" else [x["device_type"]]
        loads += [LoadRow(x["model"], a, int(x["load_us"])) for a in accs]
    return LatencyTables(tuple(rows), tuple(decode), tuple(loads), tuple(sources))


def _public(p: Mapping[str, Any]) -> PublicProfile:
    """One ``{table: public, family, gpu?, tp?, as_model, as_accelerator}`` entry."""
    try:
        acc = p["as_accelerator"]
        return public_profile(
            p["family"], p.get("gpu", acc), int(p.get("tp", 1)), p["as_model"], acc
        )
    except KeyError as e:
        raise ScenarioError(f"latency.published (table public): missing {e.args[0]!r}") from None
    except ValueError as e:
        raise ScenarioError(f"latency.published (table public): {e}") from None


def _registered(section: str, registry: PolicyRegistry, name: str, knobs: Any) -> object | None:
    if name not in registry:
        raise ScenarioError(f"{section}: unknown strategy {name!r}; known {registry.names()}")
    return None if knobs is None else _build(section, registry.entry(name).config_type, knobs)


def _transfer(section: str, raw: Any) -> TransferCosts:
    """A transfer pricing: an interconnect's name, or TransferCosts fields over the defaults
    (or over the interconnect named by ``preset``)."""
    fields = {"preset": raw} if isinstance(raw, str) else raw
    if not isinstance(fields, Mapping):
        raise ScenarioError(f"{section}: {raw!r}: expected an interconnect name or a mapping")
    fields = dict(fields)
    name = fields.pop("preset", None)
    try:
        return replace(interconnect(name) if name else TransferCosts(), **fields)
    except (TypeError, ValueError) as exc:
        raise ScenarioError(f"{section}: {raw!r}: {exc}") from None


def _core(raw: Mapping[str, Any], interconnects: Any = None) -> CoreConfig:
    raw = dict(raw)
    if interconnects is not None:
        if "transfer" in raw:
            raise ScenarioError("interconnects: core.transfer is given too; give one of them")
        raw["transfer"] = interconnects
    if "transfer" in raw:
        raw["transfer"] = _transfer("core.transfer", raw["transfer"])
    batching = raw.pop("batching", "size_delay")
    routing = raw.pop("routing", "predicted_completion")
    bc = _registered("core.batching", BATCHING, batching, raw.pop("batching_config", None))
    rc = _registered("core.routing", ROUTING, routing, raw.pop("routing_config", None))
    extra = {k: v for k, v in (("batching_config", bc), ("routing_config", rc)) if v is not None}
    return _build("core", CoreConfig, {"batching": batching, "routing": routing, **extra, **raw})


def _executor(raw: Mapping[str, Any]) -> SimExecutorConfig:
    raw = dict(raw)
    if raw.get("transfer_costs") is not None:
        raw["transfer_costs"] = _transfer("executor.transfer_costs", raw["transfer_costs"])
    return _build("executor", SimExecutorConfig, raw)


def _tenancy_manager(raw: Mapping[str, Any]) -> TenancyManagerConfig:
    raw = dict(raw)
    name = raw.pop("fair_share", "vtc")
    fc = _registered(
        "tenancy_manager.fair_share", FAIR_SHARE_POLICIES, name, raw.pop("fair_share_config", None)
    )
    return _build(
        "tenancy_manager",
        TenancyManagerConfig,
        {"fair_share": name, "fair_share_config": fc, **raw},
    )


def scenario_from_dict(raw: Mapping[str, Any]) -> Scenario:
    """Build and check a scenario; ScenarioError names the section of a bad value."""
    devices = tuple(_build("devices", DeviceSpec, d) for d in raw.get("devices") or ())
    try:
        models_raw, scales = expand_variants([dict(m) for m in raw.get("models") or ()])
    except VariantError as exc:
        raise ScenarioError(str(exc)) from None
    prices = [m.pop("cost_milli", 1000) for m in models_raw]
    models = tuple(_build("models", ModelSpec, m) for m in models_raw)
    costs = {m.key: price for m, price in zip(models, prices, strict=True)}  # variants' keys too
    ids = [d.device_id for d in devices]
    workload_raw = dict(raw.get("workload") or {})
    try:
        return Scenario(
            name=str(raw.get("name", "scenario")),
            description=str(raw.get("description", "")),
            devices=devices,
            models=models,
            workflows=tuple(dag_from_dict(w) for w in raw.get("workflows") or ()),
            placement=tuple(
                PlacedReplica(
                    p["model_key"],
                    tuple(p["device_ids"]),
                    int(p.get("replicas", 1)),
                    p.get("pool", "hot"),
                )
                for p in raw.get("placement") or ()
            ),
            workload=_build("workload", Workload, workload_raw),
            tenancy=_tenancy(raw, ids),
            latency=with_variant_rows(
                _latency(raw.get("latency") or {}, sorted({d.accelerator for d in devices})), scales
            ),
            cost=CostModel({k: ModelCostWeight(int(v), int(v)) for k, v in costs.items()}),
            core_config=_core(raw.get("core") or {}, raw.get("interconnects")),
            tenancy_config=_tenancy_manager(raw.get("tenancy_manager") or {}),
            executor=_executor(raw.get("executor") or {}),
            fleet_events=tuple(
                FleetEvent(
                    float(e["at"]), e["kind"], e["device_id"], e.get("reason", "simulated failure")
                )
                for e in raw.get("fleet_events") or ()
            ),
            seeds=tuple(int(s) for s in raw.get("seeds") or (0, 1, 2)),
        )
    except (KeyError, TypeError) as exc:
        raise ScenarioError(f"scenario {raw.get('name')!r}: missing or bad field {exc}") from None
