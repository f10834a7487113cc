"""Stored runs with a request timeline for tests that have no live runtime (the API's and the
console's): the shape the runtime writes (``control.runtime.timeline``), with figures chosen so
that device time dominates."""

from __future__ import annotations

from typing import Any

from control.services import Services


def span(
    node: str, ready: float, dispatched: float, end: float, device: float, **extra: Any
) -> dict:
    return {"node": node, "attempt": 1, "chunk": None, "key": f"r/{node}/1", "model": "e:1",
            "device": "cpu:0", "replica": "e:1@cpu:0/r0", "batch_id": f"b-{node}", "batch_size": 2,
            "batch_reason": "max delay reached", "ready_ms": ready, "enqueued_ms": ready,
            "dispatched_ms": dispatched, "end_ms": end, "queue_wait_ms": dispatched - ready,
            "batch_wait_ms": 1.0, "device_ms": device, "transfer_ms": end - dispatched - device,
            "ok": True, "error": None, **extra}  # fmt: skip


ROUTE = {"kind": "route", "node": "embed", "attempt": 1, "at_ms": 1.0, "replica": "e:1@cpu:0/r0",
         "affinity": False, "reason": "lowest predicted completion 2140 us on e:1@cpu:0/r0",
         "candidates": [{"replica": "e:1@cpu:0/r0", "total_us": 2140, "queue_us": 0,
                         "service_us": 2140, "transfer_us": 0, "load_us": 0, "saving_us": 0,
                         "hit_blocks": 0},
                        {"replica": "e:1@cpu:1/r1", "total_us": 5400, "queue_us": 3260,
                         "service_us": 2140, "transfer_us": 0, "load_us": 0, "saving_us": 0,
                         "hit_blocks": 0}]}  # fmt: skip
TIMELINE = {
    "total_ms": 60.0,
    "spans": [span("embed", 1.0, 5.0, 50.0, 40.0)],
    "decisions": [{"kind": "admission", "at_ms": 0.5, "verdict": "admitted", "reason": "ok"},
                  ROUTE],
    "dropped": 0,
}  # fmt: skip


def finished_run(services: Services, tenant_id: int, workflow: str, version: str,
                 timeline: dict | None = TIMELINE) -> str:  # fmt: skip
    """A succeeded run of ``workflow`` whose row keeps ``timeline``; its id."""
    run_id = services.requests.create("test", tenant_id=tenant_id, workflow_name=workflow,
                                      workflow_version=version, body_hash="h").id  # fmt: skip
    services.requests.start("test", run_id)
    result = {"status": "succeeded", "nodes": {}}
    if timeline is not None:
        result["timeline"] = timeline
    services.requests.finish("test", run_id, "succeeded", result=result)
    return run_id
