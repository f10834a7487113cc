"""Admin routes for canary model versions: send a fraction of a model's traffic to another
version, read how each variant fares, end the canary.

``PUT /admin/models/{name}/canary`` with ``{"version": "2", "fraction": 0.1}`` (optionally
``baseline_version``; default the model's one other active version) starts the canary or
changes its fraction; ``fraction: 0`` ends it. The core splits runs by a hash of their request
id and rolls the canary back by itself when its error rate or p99 exceeds the baseline's by the
configured margins (``LEGATO_CANARY_*``); every change, automatic ones included, is audited
(entity ``model_canary``). ``GET /admin/models/{name}/canary`` shows the state and per-variant
figures. 404 for an unknown model name, 422 naming the bad field (a fraction outside [0, 1], an
unknown version), 409 when the core refuses (a version the live runtime cannot load), 503
without a live runtime.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path
from pydantic import BaseModel, Field

from control.api.auth import require_admin
from control.api.deps import AdminDep, GatewayDep
from control.api.errors import ERROR_RESPONSES
from control.api.state import Gateway
from control.services.canary import CanaryService

router = APIRouter(
    dependencies=[Depends(require_admin)],
    responses={k: ERROR_RESPONSES[k] for k in (401, 403, 404, 409, 422, 503)},
    tags=["model"],
)

ModelName = Annotated[str, Path(min_length=1, max_length=200, description="the model's name")]


class CanarySet(BaseModel):
    version: str = Field(min_length=1, max_length=64, description="the canary version")
    fraction: float = Field(ge=0.0, le=1.0, description="share of the baseline's runs (0 ends)")
    baseline_version: str | None = Field(
        None, min_length=1, max_length=64,
        description="the version workflows name (default: the model's one other active version)",
    )  # fmt: skip

    model_config = {"extra": "forbid"}


class VariantOut(BaseModel):
    model_key: str = Field(description="name:version of this variant")
    requests: int = Field(description="steps finished on it since the canary started")
    errors: int = Field(description="of which failed")
    samples: int = Field(description="recent steps the verdict weighs")
    error_rate: float = Field(description="failed share of the recent steps")
    p99_s: float | None = Field(description="p99 dispatch-to-completion seconds, recent steps")


class CanaryOut(BaseModel):
    """A model's canary as the running core sees it (``state`` "none": never had one)."""

    model: str
    state: str = Field(description="none | running | rolled_back | ended")
    model_key: str | None = Field(None, description="the baseline, name:version")
    canary_key: str | None = Field(None, description="the canary, name:version")
    fraction: float | None = Field(None, description="share of runs sent to the canary now")
    fraction_ppm: int | None = None
    reason: str | None = Field(None, description="why it last changed (a rollback's verdict)")
    changed_at: float | None = Field(None, description="when, in the runtime's clock (seconds)")
    baseline: VariantOut | None = None
    canary: VariantOut | None = None
    draining: list[str] = Field(default_factory=list, description="canary replicas draining")


def canaries(gw: Gateway) -> CanaryService:
    """A canary service over the gateway's live runtime (its calls answer 503 without one)."""
    runtime = None if gw.inference is None else getattr(gw.inference, "runtime", None)
    return CanaryService(gw.services.factory, runtime)


@router.put("/admin/models/{name}/canary")
async def set_canary(gw: GatewayDep, name: ModelName, body: CanarySet, who: AdminDep) -> CanaryOut:
    """Send ``fraction`` of the baseline version's runs to ``version`` (0 ends the canary)."""
    state = await canaries(gw).set(who.actor, name, body.version, body.fraction,
                                   body.baseline_version)  # fmt: skip
    return CanaryOut(**state)


@router.get("/admin/models/{name}/canary")
async def get_canary(gw: GatewayDep, name: ModelName) -> CanaryOut:
    """The model's canary: fraction, state, the reason of its last change, and per variant the
    steps finished, failed, the recent error rate and p99."""
    return CanaryOut(**canaries(gw).state(name))
