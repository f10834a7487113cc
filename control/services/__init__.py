"""Use cases of the control plane: each public method is one audited transaction.

Exception by design: request lifecycle rows and usage-ledger entries are data produced at
request rate, not operator mutations; the inference path writes them unaudited in batches
(``run_records`` through the group-commit ``writer``).

``build_services`` wires every service to one session factory and clock; the API, CLI and seed
take the resulting :class:`Services` bundle. The composition root (``control.wiring``) builds
it from the settings for the product (``control.wiring.services``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from control.clock import utcnow
from control.services.analysis import TraceService, WhatIfService
from control.services.api_keys import ApiKeyService
from control.services.audit import AuditService
from control.services.catalog import LatencyProfileService, ModelService
from control.services.fidelity_reports import FidelityReportService
from control.services.fleet import DeviceService, NodeService
from control.services.lora_adapters import LoraAdapterService
from control.services.placement import PlacementPlanService, PlacementService
from control.services.requests import RequestService
from control.services.tenancy import CohortService, HeadroomService, QuotaService, TenantService
from control.services.usage import UsageLedgerService
from control.services.variants import VariantService
from control.services.workflows import SpecValidator, WorkflowService


@dataclass(frozen=True)
class Services:
    nodes: NodeService
    devices: DeviceService
    models: ModelService
    latency_profiles: LatencyProfileService
    variants: VariantService
    plans: PlacementPlanService
    placements: PlacementService
    workflows: WorkflowService
    cohorts: CohortService
    tenants: TenantService
    api_keys: ApiKeyService
    quotas: QuotaService
    headroom: HeadroomService
    requests: RequestService
    usage: UsageLedgerService
    traces: TraceService
    whatif: WhatIfService
    fidelity_reports: FidelityReportService
    audit: AuditService
    lora_adapters: LoraAdapterService
    factory: sessionmaker[Session]  # for read-only views that span several services


def build_services(
    factory: sessionmaker[Session],
    *,
    clock: Callable[[], datetime] = utcnow,
    workflow_validator: SpecValidator | None = None,
    key_pepper: bytes = b"",
    model_source_roots: Iterable[Path | str] | None = None,
) -> Services:
    """Every service over ``factory``. ``workflow_validator`` checks DAG specs (the core's);
    ``key_pepper`` keys API-key digests (a server secret, never stored in the database);
    ``model_source_roots``: the folders local model weights must lie under (default: the
    settings' ``model_source_roots``)."""
    return Services(
        nodes=NodeService(factory, clock),
        devices=DeviceService(factory, clock),
        models=ModelService(factory, clock, source_roots=model_source_roots),
        latency_profiles=LatencyProfileService(factory, clock),
        variants=VariantService(factory, clock),
        plans=PlacementPlanService(factory, clock),
        placements=PlacementService(factory, clock),
        workflows=WorkflowService(factory, clock, validator=workflow_validator),
        cohorts=CohortService(factory, clock),
        tenants=TenantService(factory, clock),
        api_keys=ApiKeyService(factory, clock, pepper=key_pepper),
        quotas=QuotaService(factory, clock),
        headroom=HeadroomService(factory, clock),
        requests=RequestService(factory, clock),
        usage=UsageLedgerService(factory, clock),
        traces=TraceService(factory, clock),
        whatif=WhatIfService(factory, clock),
        fidelity_reports=FidelityReportService(factory, clock),
        audit=AuditService(factory),
        lora_adapters=LoraAdapterService(factory, clock, source_roots=model_source_roots),
        factory=factory,
    )


__all__ = ["Services", "build_services"]
