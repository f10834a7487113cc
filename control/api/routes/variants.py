"""Precision variants of a model: register, list (with the exact quality floor), retire.

Each route calls one audited service method; refusals (a precision out of the vocabulary, the
base's own, one the executor cannot run, a duplicate) are 4xx bodies naming ``precision``.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Response

from control.api.auth import require_admin
from control.api.crud import IntId
from control.api.deps import AdminDep, GatewayDep
from control.api.errors import ERROR_RESPONSES
from control.api.live_feed import feed_change
from control.api.schemas import variants as v

router = APIRouter(
    prefix="/admin/models/{item_id}/variants",
    tags=["model_variant"],
    dependencies=[Depends(require_admin)],
    responses={k: ERROR_RESPONSES[k] for k in (401, 403, 404, 409, 413, 422)},
)
PrecisionPath = Annotated[str, Path(min_length=1, max_length=16, pattern="^[a-z0-9_]+$")]


@router.post("", status_code=201)
def register_variant(
    gw: GatewayDep, item_id: IntId, body: v.VariantCreate, who: AdminDep, response: Response
) -> v.VariantOut:
    """Register a precision variant of the model (measured later by ``legato profile``)."""
    values = body.model_dump(exclude_unset=True)
    record = gw.services.variants.register(who.actor, item_id, **values)
    _feed(gw, item_id, response)
    return v.VariantOut.model_validate(record, from_attributes=True)


@router.get("")
def list_variants(
    gw: GatewayDep,
    item_id: IntId,
    include_retired: Annotated[bool, Query(description="retired variants too")] = False,
) -> v.VariantList:
    """The model's variants with their measurements, and the exact-traffic quality floor."""
    gw.services.models.get(item_id)  # 404 for an unknown model
    rows = gw.services.variants.of_model(item_id, include_retired=include_retired)
    items = [v.VariantOut.model_validate(r, from_attributes=True) for r in rows]
    return v.VariantList(exact_floor=gw.services.variants.exact_floor(), items=items)


@router.delete("/{precision}")
def retire_variant(
    gw: GatewayDep, item_id: IntId, precision: PrecisionPath, who: AdminDep, response: Response
) -> v.VariantOut:
    """Retire the variant (its row stays, with its measurements; registering it again brings
    it back)."""
    record = gw.services.variants.retire_precision(who.actor, item_id, precision)
    _feed(gw, item_id, response)
    return v.VariantOut.model_validate(record, from_attributes=True)


def _feed(gw: GatewayDep, model_id: int, response: Response) -> None:
    """A variant is part of its model's catalog entry: the live core re-reads the model."""
    feed_change(gw, "model", gw.services.models.get(model_id), response)
