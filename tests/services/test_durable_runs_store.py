"""A run's inputs in the run log, on SQLite (raw and Core paths) and PostgreSQL: written with a
new request only (not with an idempotent repeat), read back by recovery joined on the
request's own tenant, and deleted with the request's end."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import func, select

from control.services.run_records import AcceptRequest, FinishRequest
from control.store import lifecycle
from control.store.runlog import WriterConfig, backend_for, recovery
from tests.services.builders import T0

INPUTS = {"tenant_name": "acme", "idempotency_key": "k1", "session_id": None,
          "max_output_tokens": 0, "payload": {"q": "x" * 1000}, "sampling": {},
          "recorded_at": T0}  # fmt: skip


def _accept(tenant: int, rid: str) -> AcceptRequest:
    return AcceptRequest.new(
        request_id=rid, tenant_id=tenant, workflow_name="rag", workflow_version="1",
        body_hash="h1", priority_class="standard", received_at=T0, idempotency_key="k1",
        inputs=INPUTS,
    )  # fmt: skip


def _count(factory) -> int:  # noqa: ANN001
    with factory() as session:
        return session.execute(select(func.count()).select_from(lifecycle.INPUTS)).scalar_one()


@pytest.mark.parametrize("raw", [True, False])
def test_inputs_are_written_with_the_accept_and_deleted_with_the_end(
    session_factory, world, raw: bool
) -> None:
    backend = backend_for(session_factory, WriterConfig(raw_sqlite=raw))
    try:
        rid = str(uuid.uuid4())
        backend.transaction([_accept(world.tenant, rid)])
        backend.transaction([_accept(world.tenant, str(uuid.uuid4()))])  # a repeat of the key
        assert _count(session_factory) == 1
        with session_factory() as session:
            [run] = recovery.open_runs(session, received_before=T0.replace(year=T0.year + 1))
        assert run.record.id == rid and run.inputs["payload"] == INPUTS["payload"]
        assert run.inputs["tenant_name"] == "acme" and run.inputs["idempotency_key"] == "k1"
        backend.transaction([FinishRequest(request_id=rid, status="succeeded", finished_at=T0)])
        assert _count(session_factory) == 0
    finally:
        backend.close()
