"""Pure helpers of the tenants page: the quota kinds the core knows, and the request bodies of
tenant, quota and key changes built from the editors' field values. No Streamlit, no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, date, datetime, time
from typing import Any

#: Quota kinds (the API's ``resource``) -> what their nominal counts, per ``period_s``.
RESOURCES: dict[str, str] = {
    "requests_per_min": "requests per period",
    "tokens_per_min": "tokens per period",
    "concurrent_requests": "requests in flight at once",
    "device_seconds_per_hour": "device-seconds per period",
    "request_burst": "burst of requests (token bucket: capacity, refilled every period)",
    "token_burst": "burst of tokens (token bucket: capacity, refilled every period)",
    "queued_runs": "runs admitted but not yet started",
}
#: Admission limits of the tenant alone: the core never lends or borrows them in a cohort.
NOT_BORROWABLE = frozenset({"request_burst", "token_burst", "queued_runs"})
CLASSES = ["critical", "standard", "batch"]
STATUSES = ["active", "suspended", "retired"]
QUOTA_FIELDS = ("nominal", "borrowing_limit", "lending_limit", "period_s")
TENANT_FIELDS = ("name", "weight", "priority_class", "status", "cohort_id", "strict_priority")


def limit(unlimited: bool, value: float | int | None) -> int | None:
    """A borrowing or lending limit as the API takes it: None means without limit."""
    return None if unlimited or value is None else int(value)


def quota_body(values: Mapping[str, Any], creating: bool) -> dict[str, Any]:
    """The quota as POST (``creating``: with tenant and resource) or PATCH takes it, from the
    editor's values (``borrow_any``/``lend_any``: no limit)."""
    body = {
        "nominal": int(values["nominal"]),
        "borrowing_limit": limit(values["borrow_any"], values["borrowing_limit"]),
        "lending_limit": limit(values["lend_any"], values["lending_limit"]),
        "period_s": int(values["period_s"]),
    }
    if creating:
        return {"tenant_id": values["tenant_id"], "resource": values["resource"], **body}
    return body


def changed(stored: Mapping[str, Any], body: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of ``body`` that differ from ``stored`` (what a PATCH needs to send)."""
    return {k: v for k, v in body.items() if stored.get(k) != v}


def quota_label(quota: Mapping[str, Any], names: Mapping[int, str]) -> str:
    return f"{names.get(quota['tenant_id'], quota['tenant_id'])} · {quota['resource']}"


def tenant_body(values: Mapping[str, Any]) -> dict[str, Any]:
    """The tenant as the API takes it, from the editor's values."""
    return {"name": values["name"], "weight": int(values["weight"]),
            "priority_class": values["priority_class"], "status": values["status"],
            "cohort_id": values["cohort_id"],
            "strict_priority": bool(values["strict_priority"]),
            "quality": values.get("quality") or None,
            "allow_degrade": bool(values.get("allow_degrade", False))}  # fmt: skip


def schedules(change: Mapping[str, Any]) -> bool:
    """Whether a tenant change (``id`` and changed fields) alters scheduling: a new name or
    no change at all does not."""
    return any(k not in ("id", "name") for k in change)


def expiry(on: bool, day: date | None, at: time | None) -> str | None:
    """The key's ``expires_at`` (ISO 8601, UTC) from the editor's date and time, or None."""
    if not on or day is None:
        return None
    return datetime.combine(day, at or time(0, 0), tzinfo=UTC).isoformat()


def key_state(key: Mapping[str, Any], now: datetime) -> str:
    """``revoked``, ``expired`` or ``active``, as the API's authentication would judge it."""
    if key.get("revoked_at"):
        return "revoked"
    until = key.get("expires_at")
    if until and datetime.fromisoformat(str(until).replace("Z", "+00:00")) <= now:
        return "expired"
    return "active"
