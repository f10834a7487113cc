"""What every inference route shares: idempotency, starting a run, waiting for it, and turning
its outcome into a response or an error (429 with Retry-After, 503, 504).

A request's idempotency identity is the tenant, the ``Idempotency-Key`` header and a hash of
the route and body: a repeat with the same body returns the first run's result (not run or
billed again); the same key with another body is a 409.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import Header

from control.api.auth import Principal
from control.api.door import Door
from control.api.errors import ApiError, Problem
from control.api.ports import Inference
from control.api.prompts import prompt_shape
from control.api.schemas.inference import NodeRun, RunOut, RunUsage
from control.api.state import Gateway
from control.core.capacity import CapacityAdmissionConfig
from control.services.errors import Conflict
from control.services.inference_calls import RunCall, Started
from control.store.records import RequestRecord

IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=160,
        description="repeat a request safely: same key and body -> the first result (not run "
        "or billed again); a request refused with 429 does not spend its key",
    ),
]


def body_hash(route: str, body: Mapping[str, Any]) -> str:
    """sha256 of the route and the canonical JSON of the body."""
    text = json.dumps({"route": route, "body": body}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def inference_of(gw: Gateway) -> Inference:
    """The gateway's inference service; 503 when it runs no live runtime."""
    if gw.inference is None:
        raise ApiError(503, "unavailable", "this gateway runs no live runtime")
    return gw.inference


async def start_run(
    gw: Gateway,
    who: Principal,
    workflow: tuple[str, str],
    payload: Mapping[str, Any],
    digest: str,
    key: str | None,
    *,
    max_output_tokens: int = 0,
    session_id: str | None = None,
    quality: str | None = None,
    announce_at_end: bool = False,
    sampling: Mapping[str, Any] | None = None,
    timeout_s: float | None = None,
) -> Started:
    """Record and start a run for the calling tenant (or find the first one of ``key``).
    ``announce_at_end``: the caller will answer only with the settled run (synchronous routes),
    so its row may be committed together with its end. ``timeout_s``: how long the caller
    waits (the run's deadline: admission refuses a run predicted to wait longer)."""
    assert who.tenant_id is not None and who.tenant_name is not None
    inference = inference_of(gw)
    door = door_of(gw)
    priority_class = inference.catalog.priority_of(who.tenant_name)
    refusal = door.check(priority_class, timeout_s)
    if refusal is not None:  # refused before the run log or the core see it
        raise ApiError(429, "rejected", f"not admitted: {refusal.reason}",
                       headers={"Retry-After": str(max(1, math.ceil(refusal.retry_after_s)))})  # fmt: skip
    shape = await prompt_shape(gw, f"{workflow[0]}:{workflow[1]}", payload, sampling or {})
    call = RunCall(
        tenant_id=who.tenant_id, tenant_name=who.tenant_name, actor=who.actor,
        workflow_name=workflow[0], workflow_version=workflow[1], payload=payload,
        body_hash=digest, idempotency_key=key, max_output_tokens=max_output_tokens,
        session_id=session_id, quality=quality, announce_at_end=announce_at_end,
        sampling=dict(sampling or {}), timeout_s=timeout_s, prefix_blocks=shape.prefix_blocks,
        prompt_tokens=shape.tokens,
    )  # fmt: skip
    started = await inference.submit(call)
    if announce_at_end and not started.existing:
        door.hold(
            started.request.id, priority_class
        )  # the caller waits on the path until settled()
    return started


def door_of(gw: Gateway) -> Door:
    """The gateway's door (made on first use, from the gateway's capacity settings)."""
    door = gw.extras.get("door")
    if door is None:
        config = CapacityAdmissionConfig(
            enabled=gw.config.capacity_admission,
            margin=gw.config.capacity_margin,
            lower_class_path_s=gw.config.capacity_lower_class_path_s,
        )
        door = gw.extras["door"] = Door(config)
    return door


async def settled(gw: Gateway, run_id: str, timeout_s: float) -> RequestRecord:
    """The run's record once it ended; 504 naming the run id when ``timeout_s`` passes."""
    inference = inference_of(gw)
    try:
        return await _settled(inference, run_id, timeout_s)
    finally:
        door_of(gw).leave(run_id)


async def _settled(inference: Inference, run_id: str, timeout_s: float) -> RequestRecord:
    record = await inference.wait(run_id, timeout_s)
    if record.status in ("queued", "running"):
        # the caller gave up: the run is cancelled, so that it holds no quota, concurrency or
        # queue place for an answer nobody waits for (issue 22); one that ended meanwhile stands
        try:
            record = await inference.cancel(
                run_id, "gateway", f"caller timed out ({timeout_s:g} s)"
            )
        except Conflict:
            record = await inference.get(run_id)
        if record.status in ("queued", "running", "cancelled"):
            await inference.recorded(run_id)  # the run id below must be found by a GET
            raise ApiError(
                504,
                "timeout",
                f"run {run_id} did not finish within {timeout_s:g} s: cancelled "
                f"(GET /v1/runs/{run_id} shows it)",
            )
    return record


def raise_for_outcome(record: RequestRecord, fields: Mapping[str, str] | None = None) -> None:
    """Errors for runs that did not succeed: 429 for a rejection (with Retry-After from the
    core's decision), 422 naming the field when the run's fault class is ``bad_input`` (the
    caller's input is unusable: retrying cannot help), 503 when no device could serve, 502 for
    any other failure. ``fields`` renames the run's input (``inputs.text``) to the route's
    (``input[2]``)."""
    if record.status == "succeeded":
        return
    result = record.result or {}
    if record.status == "rejected":
        retry = float(result.get("retry_after_s") or 1.0)
        raise ApiError(
            429,
            "rejected",
            f"not admitted: {record.error or result.get('reason', 'over quota')}",
            headers={"Retry-After": str(max(1, math.ceil(retry)))},
        )
    error = record.error or "the run failed"
    if result.get("fault") == "bad_input":
        raise _bad_input(record, error, fields or {})
    if "no healthy" in error or "device" in error and "down" in error:
        raise ApiError(503, "no_capacity", f"run {record.id} could not be served: {error}")
    raise ApiError(502, "run_failed", f"run {record.id} {record.status}: {error}")


def _bad_input(record: RequestRecord, error: str, fields: Mapping[str, str]) -> ApiError:
    """The 422 of a run that failed on an unusable input (``bad_input``)."""
    field = (record.result or {}).get("field")
    if isinstance(field, str):
        name, bracket, rest = field.partition("[")
        field = fields[name] + bracket + rest if name in fields else field
    else:
        field = None
    problems = [Problem(location=field, message=error)] if field is not None else []
    return ApiError(422, "bad_input", f"run {record.id} {record.status}: {error}", field=field,
                    problems=problems)  # fmt: skip


def run_out(record: RequestRecord) -> RunOut:
    """The tenant's view of a run."""
    result = record.result or {}
    usage = result.get("usage")
    nodes = result.get("nodes")
    return RunOut(
        id=record.id,
        workflow=record.workflow_name,
        version=record.workflow_version,
        status=record.status,
        outputs=result.get("outputs") if record.status == "succeeded" else None,
        error=record.error,
        usage=RunUsage(**usage) if isinstance(usage, dict) else None,
        nodes={k: NodeRun(**v) for k, v in nodes.items()} if isinstance(nodes, dict) else None,
        retry_after_s=result.get("retry_after_s") if record.status == "rejected" else None,
        received_at=record.received_at,
        finished_at=record.finished_at,
        quality=record.quality,
        degradations=record.degradations or None,
    )


def own_run(who: Principal, record: RequestRecord) -> RequestRecord:
    """The run if the caller may see it; 404 otherwise (another tenant's run does not exist
    for this caller)."""
    if not who.is_admin and record.tenant_id != who.tenant_id:
        raise ApiError(404, "not_found", f"request {record.id!r} not found")
    return record
