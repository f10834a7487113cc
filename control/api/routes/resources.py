"""The admin resources served by the generic CRUD router (see :mod:`control.api.crud`)."""

from __future__ import annotations

from control.api.crud import Resource, StrId
from control.api.device_query import list_devices
from control.api.schemas import fleet as f
from control.api.schemas import placement as p
from control.api.schemas import records as r
from control.api.schemas import tenancy as t
from control.api.state import Gateway


def _forget_keys(gw: Gateway) -> None:
    """A tenant changed (suspended, retired): cached key checks may no longer hold."""
    gw.key_cache.clear()


RESOURCES: tuple[Resource, ...] = (
    Resource("/admin/nodes", "node", lambda s: s.nodes, f.NodeOut, f.NodeCreate, f.NodeUpdate,
             f.NodeFilter, "retire"),
    Resource("/admin/devices", "device", lambda s: s.devices, f.DeviceOut, f.DeviceCreate,
             f.DeviceUpdate, f.DeviceFilter, "retire", lister=list_devices),
    Resource("/admin/models", "model", lambda s: s.models, f.ModelOut, f.ModelCreate,
             f.ModelUpdate, f.ModelFilter, "retire"),
    Resource("/admin/latency-profiles", "latency_profile", lambda s: s.latency_profiles,
             f.LatencyProfileOut, f.LatencyProfileCreate, f.LatencyProfileUpdate,
             f.LatencyProfileFilter, "delete"),
    Resource("/admin/placement-plans", "placement_plan", lambda s: s.plans, p.PlanOut,
             p.PlanCreate, p.PlanUpdate, p.PlanFilter, "retire",
             create_extra=lambda who: {"author": who.actor}),
    Resource("/admin/placements", "placement", lambda s: s.placements, p.PlacementOut,
             p.PlacementCreate, p.PlacementUpdate, p.PlacementFilter, "delete"),
    Resource("/admin/workflows", "workflow", lambda s: s.workflows, p.WorkflowOut, None, None,
             p.WorkflowFilter, "retire"),
    Resource("/admin/cohorts", "cohort", lambda s: s.cohorts, t.CohortOut, t.CohortCreate,
             t.CohortUpdate, t.CohortFilter, "delete"),
    Resource("/admin/tenants", "tenant", lambda s: s.tenants, t.TenantOut, t.TenantCreate,
             t.TenantUpdate, t.TenantFilter, "retire", after_mutation=_forget_keys),
    Resource("/admin/keys", "api_key", lambda s: s.api_keys, t.ApiKeyOut, None, None,
             t.ApiKeyFilter, "retire", after_mutation=_forget_keys),
    Resource("/admin/quotas", "quota", lambda s: s.quotas, t.QuotaOut, t.QuotaCreate,
             t.QuotaUpdate, t.QuotaFilter, "delete"),
    Resource("/admin/headroom", "headroom_reservation", lambda s: s.headroom, t.HeadroomOut,
             t.HeadroomCreate, t.HeadroomUpdate, t.HeadroomFilter, "delete"),
    # DELETE /admin/requests/{id} is routes.runs.cancel_request: a cancel through the runtime
    Resource("/admin/requests", "request", lambda s: s.requests, r.RequestOut, None, None,
             r.RequestFilter, None, id_type=StrId),
    Resource("/admin/whatif", "whatif_run", lambda s: s.whatif, r.WhatIfOut, None, None,
             r.WhatIfFilter, "delete"),
    Resource("/admin/traces", "trace", lambda s: s.traces, r.TraceOut, None, None, None, None),
)  # fmt: skip
