"""The request timeline of a run, read from its stored record: the spans of its steps, the
decisions the core took for it, and where its time went; and the recent slow runs to pick from.

A finished run's row keeps what the runtime noted (``result["timeline"]``, see
:mod:`control.runtime.timeline`); a run still going, or one that finished before timelines were
recorded, has no spans yet. Pure functions of records: no I/O, nothing changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from control.store import records as rec

#: The parts of a run's time, in the order the timeline draws a step's bar.
PARTS = ("queue_ms", "batch_wait_ms", "transfer_ms", "device_ms")
PART_NAMES = {"queue_ms": "queue wait", "batch_wait_ms": "batch wait",
              "transfer_ms": "transfer and hand-offs", "device_ms": "device time",
              "outside_ms": "outside the steps (admission, gateway, recording)"}  # fmt: skip
#: Most finished runs read to find the slowest (newest first).
SLOW_SCAN = 500


def latency_ms(record: rec.RequestRecord) -> float | None:
    """End-to-end milliseconds of a finished run as its row says (None while it goes on)."""
    if record.finished_at is None:
        return None
    return round((record.finished_at - record.received_at).total_seconds() * 1000, 3)


def step_parts(span: Mapping[str, Any]) -> dict[str, float]:
    """A span's parts (ms): queue wait is its wait less the batching hold."""
    wait = float(span.get("queue_wait_ms") or 0.0)
    batch = min(wait, float(span.get("batch_wait_ms") or 0.0))
    return {"queue_ms": round(wait - batch, 3), "batch_wait_ms": round(batch, 3),
            "transfer_ms": float(span.get("transfer_ms") or 0.0),
            "device_ms": float(span.get("device_ms") or 0.0)}  # fmt: skip


def _covered_ms(spans: Sequence[Mapping[str, Any]]) -> float:
    """Milliseconds of the run covered by at least one step (parallel branches counted once)."""
    covered, reach = 0.0, None
    for start, end in sorted((float(s["ready_ms"]), float(s["end_ms"])) for s in spans):
        if reach is None or start > reach:
            covered += end - start
            reach = end
        elif end > reach:
            covered += end - reach
            reach = end
    return covered


def where_time_went(spans: Sequence[Mapping[str, Any]], total_ms: float) -> dict[str, Any]:
    """Totals per part over the steps (parallel steps each count), the time outside every step,
    the dominant part and a one-line summary an operator reads first."""
    totals = dict.fromkeys(PARTS, 0.0)
    for span in spans:
        for part, ms in step_parts(span).items():
            totals[part] += ms
    totals["outside_ms"] = max(0.0, total_ms - _covered_ms(spans)) if spans else total_ms
    totals = {k: round(v, 3) for k, v in totals.items()}
    dominant = max(totals, key=lambda k: totals[k])
    whole = sum(totals.values()) or 1.0
    share = round(100 * totals[dominant] / whole)
    detail = ", ".join(f"{PART_NAMES[k]} {totals[k]:.1f} ms" for k in totals)
    line = (f"{PART_NAMES[dominant]} dominated ({share}% of the parts) over "
            f"{len(spans)} step span(s) in {total_ms:.1f} ms end to end: {detail}")  # fmt: skip
    return {"totals": totals, "dominant": dominant, "summary": line}


def timeline_view(record: rec.RequestRecord, tenant: str | None) -> dict[str, Any]:
    """The timeline of ``record``: who and what, the spans (each with its parts), decisions,
    and where the time went."""
    result = record.result or {}
    kept = result.get("timeline") or {}
    spans = [dict(s, **step_parts(s)) for s in kept.get("spans", [])]
    total = kept.get("total_ms")
    if total is None:
        total = latency_ms(record) or 0.0
    return {
        "id": record.id, "tenant_id": record.tenant_id, "tenant": tenant,
        "workflow": record.workflow_name, "version": record.workflow_version,
        "status": record.status, "received_at": record.received_at,
        "finished_at": record.finished_at, "latency_ms": latency_ms(record),
        "total_ms": float(total), "spans": spans, "decisions": list(kept.get("decisions", [])),
        "dropped": int(kept.get("dropped", 0)), "recorded": bool(kept),
        "where": where_time_went(spans, float(total)),
    }  # fmt: skip


def slowest(records: Iterable[rec.RequestRecord], limit: int) -> list[dict[str, Any]]:
    """The finished runs among ``records`` by end-to-end latency, slowest first."""
    timed = [(latency_ms(r), r) for r in records]
    ranked = sorted(((ms, r) for ms, r in timed if ms is not None), key=lambda t: (-t[0], t[1].id))
    return [{"id": r.id, "tenant_id": r.tenant_id, "workflow": r.workflow_name,
             "version": r.workflow_version, "status": r.status, "received_at": r.received_at,
             "latency_ms": ms,
             "steps": len(((r.result or {}).get("timeline") or {}).get("spans", []))}
            for ms, r in ranked[:limit]]  # fmt: skip
