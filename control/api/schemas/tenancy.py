"""DTOs of tenancy: cohorts, tenants, API keys, quotas, headroom reservations."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, StrictBool

from control.api.schemas.common import Body, Dto, Id, NonNegative, Positive, name_field
from db import vocab

PriorityClass = Literal[vocab.PRIORITY_CLASSES]  # type: ignore[valid-type]
TenantStatus = Literal[vocab.TENANT_STATUSES]  # type: ignore[valid-type]
QualityClass = Literal[vocab.QUALITY_CLASSES]  # type: ignore[valid-type]
QUALITY = "default quality class of its runs (precision variants); None: from its priority class"
ALLOW_DEGRADE = (
    "may the core run its steps on a cheaper variant when the preferred one is saturated"
)
QuotaResource = Literal[vocab.QUOTA_RESOURCES]  # type: ignore[valid-type]
STRICT_PRIORITY = (
    "serve this tenant's work ahead of other tenants' lower-class work while it is less than "
    "LEGATO_STRICT_PRIORITY_LEAD cost units (per weight) ahead of the least-served waiting tenant"
)


class CohortOut(Dto):
    id: int
    name: str
    description: str
    created_at: datetime


class CohortCreate(Body):
    name: str = name_field(100)
    description: str = Field("", max_length=10_000)


class CohortUpdate(Body):
    name: str | None = name_field(100, default=None)
    description: str | None = Field(None, max_length=10_000)


class CohortFilter(BaseModel):
    name: str | None = None


class TenantOut(Dto):
    id: int
    name: str
    weight: int
    priority_class: str
    status: str
    cohort_id: int | None
    strict_priority: bool
    quality: str | None = None
    allow_degrade: bool = False
    created_at: datetime


class TenantCreate(Body):
    name: str = name_field(100)
    weight: Positive = Field(1, description="fair-share weight (ratios between tenants matter)")
    priority_class: PriorityClass = "standard"
    status: TenantStatus = "active"
    cohort_id: Id | None = None
    strict_priority: StrictBool = Field(False, description=STRICT_PRIORITY)
    quality: QualityClass | None = Field(None, description=QUALITY)
    allow_degrade: StrictBool = Field(False, description=ALLOW_DEGRADE)


class TenantUpdate(Body):
    name: str | None = name_field(100, default=None)
    weight: Positive | None = None
    priority_class: PriorityClass | None = None
    status: TenantStatus | None = None
    cohort_id: Id | None = None
    strict_priority: StrictBool | None = Field(None, description=STRICT_PRIORITY)
    quality: QualityClass | None = Field(None, description=QUALITY)
    allow_degrade: StrictBool | None = Field(None, description=ALLOW_DEGRADE)


class TenantFilter(BaseModel):
    status: TenantStatus | None = None
    cohort_id: Id | None = None
    name: str | None = None


class ApiKeyOut(Dto):
    """A key as stored: never its secret or digest."""

    id: int
    tenant_id: int
    prefix: str
    label: str
    created_at: datetime
    revoked_at: datetime | None
    last_used_at: datetime | None
    expires_at: datetime | None = Field(None, description="None: never expires")


class ApiKeyIssued(ApiKeyOut):
    """A new key. ``key`` is the plaintext: shown this once, stored nowhere."""

    key: str


class ApiKeyCreate(Body):
    label: str = Field("", max_length=200)
    expires_at: datetime | None = Field(
        None,
        description="when the key stops working (must be in the future; without a zone: UTC); "
        "None: never. An expired key is refused with a 401 that says it expired",
    )


class ApiKeyFilter(BaseModel):
    tenant_id: Id | None = None


class QuotaOut(Dto):
    id: int
    tenant_id: int
    resource: str
    nominal: int
    borrowing_limit: int | None
    lending_limit: int | None
    period_s: int


class QuotaCreate(Body):
    tenant_id: Id
    resource: QuotaResource
    nominal: NonNegative
    borrowing_limit: NonNegative | None = Field(None, description="None: borrow without limit")
    lending_limit: NonNegative | None = Field(None, description="None: lend all idle quota")
    period_s: Positive = 60


class QuotaUpdate(Body):
    nominal: NonNegative | None = None
    borrowing_limit: NonNegative | None = None
    lending_limit: NonNegative | None = None
    period_s: Positive | None = None


class QuotaFilter(BaseModel):
    tenant_id: Id | None = None
    resource: QuotaResource | None = None


class HeadroomOut(Dto):
    id: int
    name: str
    selector: dict[str, Any]
    reserved_milli: int
    allowed_classes: list[str]
    borrowable: bool
    created_at: datetime


class HeadroomSelector(Body):
    """Which devices the reservation covers; every given key must match."""

    labels: dict[str, Any] | None = None
    accelerator: str | None = Field(None, max_length=64)
    device_ids: list[Id] | None = None


class HeadroomCreate(Body):
    name: str = name_field(100)
    selector: dict[str, Any] = Field(
        description="labels (object), accelerator (string) and/or device_ids (list of ids)"
    )
    reserved_milli: int = Field(ge=0, le=vocab.MAX_RESERVED_MILLI, description="150 = 15%")
    allowed_classes: list[PriorityClass]
    borrowable: bool = True


class HeadroomUpdate(Body):
    name: str | None = name_field(100, default=None)
    selector: dict[str, Any] | None = None
    reserved_milli: int | None = Field(None, ge=0, le=vocab.MAX_RESERVED_MILLI)
    allowed_classes: list[PriorityClass] | None = None
    borrowable: bool | None = None


class HeadroomFilter(BaseModel):
    name: str | None = None
