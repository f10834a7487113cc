"""One router per admin resource, generated from a declarative :class:`Resource`.

Each resource gets: a paginated, filtered list (an unknown filter is a 422 naming the known
ones; a resource may bring its own list route); get by id; create; partial update; and removal
(retire for entities with a status, delete for the rest). Routes are a few lines: convert the
DTO, call one service method with the caller as actor, convert the record back. The services
make every mutation one transaction with its audit record.

No ``from __future__ import annotations`` here: FastAPI reads the generated functions'
annotations at runtime, and they refer to the resource's DTO classes held in closures.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query
from fastapi.responses import Response
from pydantic import BaseModel

from control.api.auth import Principal, require_admin
from control.api.deps import AdminDep, GatewayDep, PageDep
from control.api.errors import ERROR_RESPONSES
from control.api.live_feed import feed_change
from control.api.pagination import page_of
from control.api.query_guard import known_query
from control.api.schemas.common import MAX_INT, Page
from control.api.state import Gateway
from control.services import Services

#: Path ids: bounded so that a wild number is a 422, not a database overflow.
IntId = Annotated[int, Path(ge=1, le=MAX_INT)]
StrId = Annotated[str, Path(min_length=1, max_length=64)]


@dataclass(frozen=True)
class Resource:
    """How one entity is exposed. ``service`` picks the CrudService out of the bundle."""

    path: str
    tag: str
    service: Callable[[Services], Any]
    out: type[BaseModel]
    create: type[BaseModel] | None = None
    update: type[BaseModel] | None = None
    filters: type[BaseModel] | None = None
    removal: str | None = None  # "retire" | "delete" | None
    id_type: Any = IntId
    #: Extra values for create taken from the caller (e.g. a plan's author).
    create_extra: Callable[[Principal], dict[str, Any]] | None = None
    #: Called after every successful mutation (e.g. forget cached key checks).
    after_mutation: Callable[[Gateway], None] | None = None
    #: A list route of its own (filters on live values), served instead of the generic one.
    lister: Callable[..., Any] | None = None
    summary: str = field(default="")


def _dto(resource: Resource) -> Callable[[Any], BaseModel]:
    return lambda record: resource.out.model_validate(record, from_attributes=True)


def _mutated(resource: Resource, gw: Gateway, record: Any, response: Response) -> None:
    """After a committed mutation: the resource's own hook, then the live core's feed."""
    if resource.after_mutation is not None:
        resource.after_mutation(gw)
    feed_change(gw, resource.tag, record, response)


def crud_router(resource: Resource) -> APIRouter:
    """The router of ``resource`` (admin credential on every route)."""
    router = APIRouter(
        prefix=resource.path,
        tags=[resource.tag],
        dependencies=[Depends(require_admin)],
        responses={k: ERROR_RESPONSES[k] for k in (401, 403, 404, 409, 413, 422)},
    )
    _add_reads(router, resource)
    if resource.create is not None:
        _add_create(router, resource)
    if resource.update is not None:
        _add_update(router, resource)
    if resource.removal is not None:
        _add_removal(router, resource)
    return router


def _add_reads(router: APIRouter, resource: Resource) -> None:
    out, filters, id_type, to_dto = resource.out, resource.filters, resource.id_type, _dto(resource)
    entity = resource.tag

    if filters is not None:

        def list_items(
            gw: GatewayDep,
            where: Annotated[filters, Query()],  # type: ignore[valid-type]
            page: PageDep,
        ) -> Page[out]:  # type: ignore[valid-type]
            service = resource.service(gw.services)
            found = service.page(offset=page.offset, limit=page.limit,
                                 **where.model_dump(exclude_none=True))  # type: ignore[attr-defined]  # fmt: skip
            return page_of(found, page, to_dto)

    else:

        def list_items(  # type: ignore[misc]
            gw: GatewayDep, page: PageDep
        ) -> Page[out]:  # type: ignore[valid-type]
            service = resource.service(gw.services)
            return page_of(service.page(offset=page.offset, limit=page.limit), page, to_dto)

    if resource.lister is not None:
        list_items = resource.lister  # type: ignore[assignment]
    guard = Depends(known_query(filters.model_fields if filters is not None else ()))
    router.add_api_route("", list_items, methods=["GET"], summary=f"List {entity}s",
                         dependencies=[guard])  # fmt: skip

    def get_item(gw: GatewayDep, item_id: id_type) -> out:  # type: ignore[valid-type]
        return to_dto(resource.service(gw.services).get(item_id))

    router.add_api_route("/{item_id}", get_item, methods=["GET"], summary=f"Get one {entity}")


def _add_create(router: APIRouter, resource: Resource) -> None:
    create, out, to_dto = resource.create, resource.out, _dto(resource)

    def create_item(
        gw: GatewayDep,
        response: Response,
        body: create,  # type: ignore[valid-type]
        principal: AdminDep,
    ) -> out:  # type: ignore[valid-type]
        values = body.model_dump(exclude_unset=True)  # type: ignore[attr-defined]
        if resource.create_extra is not None:
            values.update(resource.create_extra(principal))
        service = resource.service(gw.services)
        record = service.create(principal.actor, **values)
        _mutated(resource, gw, record, response)
        return to_dto(record)

    router.add_api_route(
        "", create_item, methods=["POST"], status_code=201, summary=f"Create a {resource.tag}"
    )


def _add_update(router: APIRouter, resource: Resource) -> None:
    update, out, id_type, to_dto = resource.update, resource.out, resource.id_type, _dto(resource)

    def update_item(
        gw: GatewayDep,
        response: Response,
        item_id: id_type,  # type: ignore[valid-type]
        body: update,  # type: ignore[valid-type]
        principal: AdminDep,
    ) -> out:  # type: ignore[valid-type]
        changes = body.model_dump(exclude_unset=True)  # type: ignore[attr-defined]
        service = resource.service(gw.services)
        record = service.update(principal.actor, item_id, **changes)
        _mutated(resource, gw, record, response)
        return to_dto(record)

    router.add_api_route(
        "/{item_id}", update_item, methods=["PATCH"], summary=f"Change a {resource.tag}"
    )


def _add_removal(router: APIRouter, resource: Resource) -> None:
    out, id_type, to_dto = resource.out, resource.id_type, _dto(resource)

    if resource.removal == "retire":

        def retire_item(
            gw: GatewayDep,
            response: Response,
            item_id: id_type,  # type: ignore[valid-type]
            principal: AdminDep,
        ) -> out:  # type: ignore[valid-type]
            record = resource.service(gw.services).retire(principal.actor, item_id)
            _mutated(resource, gw, record, response)
            return to_dto(record)

        summary = f"Retire a {resource.tag} (soft delete; the record stays)"
        router.add_api_route("/{item_id}", retire_item, methods=["DELETE"], summary=summary)
        return

    def delete_item(
        gw: GatewayDep,
        item_id: id_type,  # type: ignore[valid-type]
        principal: AdminDep,
    ) -> Response:
        resource.service(gw.services).delete(principal.actor, item_id)
        done = Response(status_code=204)
        _mutated(resource, gw, None, done)
        return done

    router.add_api_route(
        "/{item_id}",
        delete_item,
        methods=["DELETE"],
        status_code=204,
        response_class=Response,
        summary=f"Delete a {resource.tag}",
    )


__all__ = ["IntId", "Resource", "StrId", "crud_router"]
