"""The dependencies the routes share, declared once as ``Annotated`` aliases.

A route names what it needs by type: ``gw: GatewayDep`` (the gateway's shared state),
``who: AdminDep`` / ``TenantDep`` / ``AnyoneDep`` (the authenticated caller, 401/403 as
:mod:`control.api.auth` says), ``page: PageDep`` (limit/offset query parameters),
``inference: InferenceDep`` (the live inference service; 503 when the gateway runs none).

FastAPI solves a route's dependencies in the order its parameters are declared (the router's
own ``dependencies`` first), so put the caller before ``InferenceDep`` wherever a 401 must win
over a 503. The hot inference routes (:mod:`control.api.hot_routes`) take ``request: Request``
and a credential alias only: their fast path solves nothing else.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from starlette.requests import HTTPConnection

from control.api.auth import Principal, any_principal, require_admin, require_tenant
from control.api.pagination import PageParams, page_params
from control.api.ports import Inference
from control.api.running import inference_of
from control.api.state import Gateway


async def _gateway(connection: HTTPConnection) -> Gateway:
    # async: solved on the event loop, not in a worker thread, even for sync routes
    return connection.app.state.gateway


async def _inference(gw: Annotated[Gateway, Depends(_gateway)]) -> Inference:
    return inference_of(gw)


#: The gateway state of the app serving the request (HTTP or WebSocket).
GatewayDep = Annotated[Gateway, Depends(_gateway)]
#: The admin credential; a tenant key is a 403, anything else the generic 401.
AdminDep = Annotated[Principal, Depends(require_admin)]
#: A tenant API key (inference spends the tenant's quota); the admin token is a 403.
TenantDep = Annotated[Principal, Depends(require_tenant)]
#: The admin or a tenant: any valid credential.
AnyoneDep = Annotated[Principal, Depends(any_principal)]
#: ``limit`` and ``offset`` query parameters.
PageDep = Annotated[PageParams, Depends(page_params)]
#: The live inference service; 503 when this gateway runs no live runtime.
InferenceDep = Annotated[Inference, Depends(_inference)]
