"""``/admin/policies``: the live core's policies, read and changed without a restart.

GET shows the policies in force (the document of :mod:`control.services.policy_doc`), which
fields may change live and the registered strategies of each family with their config fields.
PATCH takes a partial document: a change is applied to the running core at once and audited;
a bad one is a 422 naming the field (an unknown strategy lists the known ones), nothing
changed. 503 on a gateway that runs no live core.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from fastapi import APIRouter, Body
from pydantic import BaseModel, Field

from control.api.deps import AdminDep, GatewayDep
from control.api.errors import ERROR_RESPONSES, ApiError
from control.services.live_policies import LivePolicies
from control.services.policy_doc import STRATEGIES, PolicyFieldError, document
from control.services.policy_fields import LIVE_FIELDS, POLICY_FIELDS

router = APIRouter(tags=["policies"],
                   responses={k: ERROR_RESPONSES[k] for k in (401, 403, 422, 503)})  # fmt: skip

#: Where the gateway keeps the live policies service (``Gateway.extras``).
EXTRA = "live_policies"


class Strategy(BaseModel):
    name: str
    help: str
    config_fields: list[str]


class PoliciesOut(BaseModel):
    policies: dict[str, Any] = Field(description="the policies in force (PATCH takes a part)")
    live_fields: list[str] = Field(description="fields PATCH may change on the running core")
    fixed_at_start: list[str] = Field(description="fields only a restart changes "
                                      "(LEGATO_CORE_POLICIES)")  # fmt: skip
    strategies: dict[str, list[Strategy]] = Field(description="registered strategies by field")


def _service(gw: Any) -> LivePolicies:
    found = gw.extras.get(EXTRA)
    if found is None:
        raise ApiError(503, "unavailable", "this gateway runs no live core: no policies to show")
    return found


def _out(service: LivePolicies) -> PoliciesOut:
    strategies = {
        name: [Strategy(name=n, help=registry.entry(n).help,
                        config_fields=[f.name for f in dataclasses.fields(
                            registry.entry(n).config_type)])
               for n in registry.names()]
        for name, (_, registry) in STRATEGIES.items()
    }  # fmt: skip
    return PoliciesOut(
        policies=document(service.current()),
        live_fields=sorted(LIVE_FIELDS),
        fixed_at_start=sorted(set(POLICY_FIELDS) - LIVE_FIELDS),
        strategies=strategies,
    )


@router.get("/admin/policies")
async def get_policies(gw: GatewayDep, who: AdminDep) -> PoliciesOut:
    """The live core's batching, routing and fair-share policies and every other knob."""
    return _out(_service(gw))


@router.patch("/admin/policies")
async def change_policies(
    gw: GatewayDep,
    who: AdminDep,
    changes: Annotated[
        dict[str, Any],
        Body(
            description="fields of the policy document to "
            'change, e.g. {"batching_config": '
            '{"max_queue_delay_s": 0.02}}'
        ),
    ],  # fmt: skip
) -> PoliciesOut:
    """Change policies on the running core (applied at once, audited as ``core_policies``)."""
    service = _service(gw)
    try:
        await service.change(who.actor, changes)
    except PolicyFieldError as exc:
        raise ApiError(422, "invalid_policy", str(exc), field=exc.field) from None
    return _out(service)
