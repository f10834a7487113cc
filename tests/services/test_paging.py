"""Lists paged and filtered in the database: offset/limit/total for CRUD lists, the audit log
newest first with actor/entity/action/time filters, and the ledger by tenant and period with
sums over the whole filter (not just the page)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from control.services.errors import ValidationError
from control.services.run_records import AcceptRequest, BillStep
from control.store.runlog.apply import apply_ops
from control.store.runlog.core_sql import CoreStatements
from db.session import session_scope
from tests.services.builders import ACTOR, T0


@pytest.mark.parametrize(
    ("offset", "limit", "newest_first", "expect"),
    [
        (0, 2, False, ["t0", "t1"]),
        (2, 2, False, ["t2", "t3"]),
        (0, 2, True, ["t4", "t3"]),
        (4, 10, False, ["t4"]),
        (9, 10, False, []),
    ],
)
def test_crud_pages_are_cut_in_the_database(services, offset, limit, newest_first, expect):
    for i in range(5):
        services.tenants.create(ACTOR, name=f"t{i}", weight=1 + i % 2)
    found = services.tenants.page(offset=offset, limit=limit, newest_first=newest_first)
    assert [t.name for t in found.items] == expect and found.total == 5
    heavy = services.tenants.page(weight=2)
    assert heavy.total == 2 and {t.name for t in heavy.items} == {"t1", "t3"}


@pytest.mark.parametrize(("field", "value"), [("offset", -1), ("limit", -5), ("colour", "red")])
def test_bad_page_arguments_are_refused(services, field, value):
    with pytest.raises(ValidationError) as caught:
        services.tenants.page(**{field: value})
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("filters", "expect"),
    [
        ({}, ["update:t1", "create:t1", "create:t0"]),
        ({"action": "create"}, ["create:t1", "create:t0"]),
        ({"actor": "bob"}, ["update:t1"]),
        ({"since": 1}, ["update:t1", "create:t1"]),  # at or after the 2nd record's time
        ({"until": 1}, ["create:t0"]),  # before the 2nd record's time
        ({"newest_first": False}, ["create:t0", "create:t1", "update:t1"]),
    ],
)
def test_audit_log_filters_and_order(services, filters, expect):
    t0 = services.tenants.create(ACTOR, name="t0", weight=1)
    t1 = services.tenants.create(ACTOR, name="t1", weight=1)
    services.tenants.update("bob", t1.id, weight=3)  # the step clock: each later than the last
    names = {str(t0.id): "t0", str(t1.id): "t1"}
    times = [a.at for a in services.audit.page(newest_first=False).items]
    bounds = {k: times[v] for k, v in filters.items() if k in ("since", "until")}
    found = services.audit.page(entity_type="tenant", **{**filters, **bounds})
    assert [f"{a.action}:{names[a.entity_id]}" for a in found.items] == expect
    assert found.total == len(expect)


def test_ledger_is_filtered_by_tenant_and_period_with_sums_over_all_matches(
    services, session_factory
):
    a = services.tenants.create(ACTOR, name="a", weight=1)
    b = services.tenants.create(ACTOR, name="b", weight=1)
    ops = []
    for i, tenant in enumerate([a, a, b, a]):
        rid = str(uuid.uuid4())
        ops.append(AcceptRequest.new(request_id=rid, tenant_id=tenant.id, workflow_name="w",
                                     workflow_version="1", body_hash="h",
                                     priority_class="standard", received_at=T0))  # fmt: skip
        ops.append(BillStep(request_id=rid, node_id="n", attempt="1", input_tokens=10 * (i + 1),
                            output_tokens=1, device_ms=1, cost_units=i + 1,
                            recorded_at=T0 + timedelta(minutes=i)))  # fmt: skip
    with session_scope(session_factory) as session:
        apply_ops(CoreStatements(session.connection()), ops)
    page = services.usage.ledger(tenant_id=a.id, offset=1, limit=1)
    assert page.total == 3 and len(page.lines) == 1
    assert page.totals["input_tokens"] == 10 + 20 + 40  # all of a's entries, not the page
    assert (page.lines[0].tenant_id, page.lines[0].tenant_name) == (a.id, "a")
    window = services.usage.ledger(since=T0 + timedelta(minutes=1), until=T0 + timedelta(minutes=3))
    assert [x.tenant_name for x in window.lines] == ["a", "b"]
    assert window.totals["cost_units"] == 2 + 3
