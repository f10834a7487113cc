"""All tables of the control-plane schema; importing this package fills ``Base.metadata``."""

from db.models.analysis import FidelityReport, Trace, WhatIfRun
from db.models.audit import AuditRecord
from db.models.catalog import ModelLatencyProfile, ServedModel
from db.models.fleet import Device, Node
from db.models.placement import Placement, PlacementPlan
from db.models.requests import Request, RunInput, RunStep, UsageEntry
from db.models.tenancy import ApiKey, Cohort, HeadroomReservation, Quota, Tenant
from db.models.variants import LoraAdapter, ModelVariant
from db.models.workflow import Workflow

__all__ = [
    "ApiKey",
    "AuditRecord",
    "Cohort",
    "Device",
    "FidelityReport",
    "HeadroomReservation",
    "LoraAdapter",
    "ModelLatencyProfile",
    "ModelVariant",
    "Node",
    "Placement",
    "PlacementPlan",
    "Quota",
    "Request",
    "RunInput",
    "RunStep",
    "ServedModel",
    "Tenant",
    "Trace",
    "UsageEntry",
    "WhatIfRun",
    "Workflow",
]
