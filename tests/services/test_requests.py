"""Requests: idempotency keys per tenant, and the run's status transitions."""

from __future__ import annotations

import pytest

from control.services import Services
from control.services.errors import (
    Conflict,
    IdempotencyConflict,
    UnknownReference,
    ValidationError,
)
from tests.services.builders import ACTOR, World, row_counts

HASH_A = "a" * 64
HASH_B = "b" * 64


def submit(services: Services, world: World, **overrides):
    values = dict(
        tenant_id=world.tenant, workflow_name="rag", workflow_version="1", body_hash=HASH_A
    )
    return services.requests.submit(ACTOR, **{**values, **overrides})


def test_new_request_is_queued_with_the_tenant_class_and_a_uuid(
    services: Services, world: World
) -> None:
    sub = submit(services, world)
    assert not sub.existing
    req = services.requests.get(sub.request.id)
    assert (req.status, req.priority_class, req.tenant_id) == ("queued", "standard", world.tenant)
    assert len(req.id) == 36 and req.received_at.utcoffset() is not None


def test_same_key_and_body_returns_the_earlier_request_and_writes_nothing(
    services: Services, world: World, session_factory
) -> None:
    first = submit(services, world, idempotency_key="k-1")
    before = row_counts(session_factory)
    again = submit(services, world, idempotency_key="k-1")
    assert again.existing and again.request == first.request
    assert row_counts(session_factory) == before


def test_same_key_with_another_body_is_an_idempotency_conflict(
    services: Services, world: World, session_factory
) -> None:
    first = submit(services, world, idempotency_key="k-1")
    before = row_counts(session_factory)
    with pytest.raises(IdempotencyConflict) as caught:
        submit(services, world, idempotency_key="k-1", body_hash=HASH_B)
    assert "k-1" in str(caught.value) and first.request.id in str(caught.value)
    assert row_counts(session_factory) == before


def test_keys_are_scoped_per_tenant_and_requests_without_key_never_collide(
    services: Services, world: World
) -> None:
    other = services.tenants.create(ACTOR, name="globex")
    mine = submit(services, world, idempotency_key="shared")
    theirs = submit(services, world, tenant_id=other.id, idempotency_key="shared")
    assert not theirs.existing and theirs.request.id != mine.request.id
    plain = {submit(services, world).request.id for _ in range(3)}
    assert len(plain) == 3


@pytest.mark.parametrize(
    ("overrides", "error", "field"),
    [
        ({"tenant_id": 987654}, UnknownReference, "tenant_id"),
        ({"workflow_name": "nope"}, UnknownReference, "workflow"),
        ({"workflow_version": "9"}, UnknownReference, "workflow"),
        ({"priority_class": "gold"}, ValidationError, "priority_class"),
        ({"body_hash": ""}, ValidationError, "body_hash"),
        ({"idempotency_key": "x" * 201}, ValidationError, "idempotency_key"),
    ],
)
def test_bad_submission_is_refused_and_writes_nothing(
    services: Services, world: World, session_factory, overrides, error, field: str
) -> None:
    before = row_counts(session_factory)
    with pytest.raises(error, match=field):
        submit(services, world, **overrides)
    assert row_counts(session_factory) == before


def test_requests_for_retired_workflows_or_suspended_tenants_are_refused(
    services: Services, world: World
) -> None:
    services.tenants.update(ACTOR, world.tenant, status="suspended")
    with pytest.raises(ValidationError, match="suspended"):
        submit(services, world)
    services.tenants.update(ACTOR, world.tenant, status="active")
    services.workflows.retire(ACTOR, world.workflow)
    with pytest.raises(UnknownReference, match="rag@1"):
        submit(services, world)


def test_a_run_goes_queued_running_succeeded_with_timings_and_audit(
    services: Services, world: World
) -> None:
    rid = submit(services, world, priority_class="critical").request.id
    started = services.requests.start(ACTOR, rid)
    first = services.requests.mark_first_token(ACTOR, rid)
    done = services.requests.finish(ACTOR, rid, "succeeded", result={"answer": "42"})
    assert started.started_at < first.first_token_at < done.finished_at
    assert (done.status, done.result, done.error) == ("succeeded", {"answer": "42"}, None)
    actions = [a.action for a in services.audit.list(entity_type="request", entity_id=rid)]
    assert actions == ["create", "start", "first_token", "finish"]


@pytest.mark.parametrize(
    ("path", "illegal"),
    [
        ([], "succeeded"),  # queued cannot succeed without running
        (["running"], "rejected"),
        (["running", "succeeded"], "failed"),
        (["cancelled"], "running"),
    ],
)
def test_illegal_transitions_are_conflicts(
    services: Services, world: World, path: list[str], illegal: str
) -> None:
    rid = submit(services, world).request.id
    for status in path:
        if status == "running":
            services.requests.start(ACTOR, rid)
        elif status == "cancelled":
            services.requests.retire(ACTOR, rid)
        else:
            services.requests.finish(ACTOR, rid, status)
    stored = services.requests.get(rid)
    with pytest.raises(Conflict, match=f"to {illegal}"):
        if illegal == "running":
            services.requests.start(ACTOR, rid)
        else:
            services.requests.finish(ACTOR, rid, illegal)
    assert services.requests.get(rid) == stored


def test_finish_refuses_a_non_terminal_status(services: Services, world: World) -> None:
    rid = submit(services, world).request.id
    with pytest.raises(ValidationError, match="status='running'"):
        services.requests.finish(ACTOR, rid, "running")


def test_requests_cannot_be_edited_or_deleted_directly(services: Services, world: World) -> None:
    rid = submit(services, world).request.id
    with pytest.raises(ValidationError, match="status"):
        services.requests.update(ACTOR, rid, status="succeeded")
    with pytest.raises(Conflict, match="cancel"):
        services.requests.delete(ACTOR, rid)
