"""The usage ledger bills each (request, node, attempt) once, whatever the replays."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from control.services import Services
from control.services.errors import UnknownReference, ValidationError
from tests.services.builders import ACTOR, World, row_counts


def new_request(services: Services, world: World) -> str:
    return services.requests.submit(
        ACTOR, tenant_id=world.tenant, workflow_name="rag", workflow_version="1", body_hash="h"
    ).request.id


def bill(services: Services, rid: str, node: str = "embed", attempt="primary", **amounts):
    values = {"input_tokens": 100, "output_tokens": 0, "device_ms": 14, "cost_units": 100}
    return services.usage.record_usage(
        ACTOR, request_id=rid, node_id=node, attempt=attempt, **{**values, **amounts}
    )


def test_second_record_of_the_same_step_is_a_no_op(
    services: Services, world: World, session_factory
) -> None:
    rid = new_request(services, world)
    first = bill(services, rid, model_id=world.model, device_id=world.device)
    assert first.created
    totals = services.usage.totals(request_id=rid)
    before = row_counts(session_factory)
    again = bill(services, rid, input_tokens=999, cost_units=999)
    assert not again.created and again.entry == first.entry
    assert "already billed" in again.reason and str(first.entry.id) in again.reason
    assert row_counts(session_factory) == before
    assert services.usage.totals(request_id=rid) == totals == {
        "input_tokens": 100, "output_tokens": 0, "device_ms": 14, "cost_units": 100,
    }  # fmt: skip


def test_a_retry_is_billed_as_its_own_attempt(services: Services, world: World) -> None:
    rid = new_request(services, world)
    bill(services, rid, attempt="primary")
    bill(services, rid, attempt="retry", input_tokens=50, cost_units=50)
    bill(services, rid, attempt=2, input_tokens=7, cost_units=7)
    assert bill(services, rid, attempt="2").created is False  # numbers are stored as text
    assert services.usage.totals(request_id=rid)["cost_units"] == 157
    assert [e.attempt for e in services.usage.list(request_id=rid)] == ["primary", "retry", "2"]


@pytest.mark.parametrize(
    ("overrides", "error", "field"),
    [
        ({"input_tokens": -1}, ValidationError, "input_tokens"),
        ({"output_tokens": -5}, ValidationError, "output_tokens"),
        ({"device_ms": -1}, ValidationError, "device_ms"),
        ({"cost_units": -1}, ValidationError, "cost_units"),
        ({"input_tokens": 1.5}, ValidationError, "input_tokens"),
        ({"input_tokens": None}, ValidationError, "input_tokens"),
        ({"node": ""}, ValidationError, "node_id"),
        ({"model_id": 987654}, UnknownReference, "model_id"),
        ({"device_id": 987654}, UnknownReference, "device_id"),
        ({"rid": "no-such-request"}, UnknownReference, "request_id"),
    ],
)
def test_bad_usage_is_refused_and_writes_nothing(
    services: Services, world: World, session_factory, overrides: dict, error, field: str
) -> None:
    overrides = dict(overrides)  # the table is shared between backends: never mutate it
    rid = overrides.pop("rid", None) or new_request(services, world)
    before = row_counts(session_factory)
    with pytest.raises(error, match=field):
        bill(services, rid, **overrides)
    assert row_counts(session_factory) == before


def test_each_entry_is_audited_once(services: Services, world: World) -> None:
    rid = new_request(services, world)
    entry = bill(services, rid).entry
    bill(services, rid)
    trail = services.audit.list(entity_type="usage_entry", entity_id=entry.id)
    assert [(a.action, a.after["cost_units"]) for a in trail] == [("create", 100)]


def test_the_ledger_offers_no_update_or_delete(services: Services) -> None:
    assert not hasattr(services.usage, "update")
    assert not hasattr(services.usage, "delete")
    assert not hasattr(services.audit, "delete")


steps = st.lists(
    st.tuples(
        st.sampled_from(["embed", "search", "rerank", "llm"]),
        st.sampled_from(["primary", "retry", "3"]),
        st.integers(min_value=0, max_value=10_000),
        st.integers(min_value=0, max_value=10_000),
    ),
    min_size=1,
    max_size=12,
)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(calls=steps)
def test_totals_count_each_step_once_however_often_it_is_replayed(
    services: Services, world: World, calls: list[tuple[str, str, int, int]]
) -> None:
    rid = new_request(services, world)  # a fresh request per example keeps examples apart
    first_seen: dict[tuple[str, str], tuple[int, int]] = {}
    for node, attempt, tokens_in, tokens_out in calls:
        result = bill(
            services, rid, node, attempt, input_tokens=tokens_in, output_tokens=tokens_out
        )
        assert result.created == ((node, attempt) not in first_seen)
        first_seen.setdefault((node, attempt), (tokens_in, tokens_out))
    totals = services.usage.totals(request_id=rid)
    assert totals["input_tokens"] == sum(i for i, _ in first_seen.values())
    assert totals["output_tokens"] == sum(o for _, o in first_seen.values())
    assert len(services.usage.list(request_id=rid)) == len(first_seen)
