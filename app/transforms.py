"""Pure transformations of the API's JSON into what pages show (no Streamlit, no HTTP).

Unit-tested on their own: workflow specs to and from editable tables, plan diffs, fair-share
shares from the live snapshot, alerts, per-workflow throughput and latency.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

NODE_COLUMNS = ["id", "task", "model", "tool", "timeout_s", "retries", "join", "params"]
EDGE_COLUMNS = ["from", "to", "when"]


def _blank(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and value != value:
        return True
    return isinstance(value, str) and not value.strip()


def nodes_frame(spec: Mapping[str, Any]) -> pd.DataFrame:
    """One row per node; ``params`` as JSON text so it can be edited in a cell."""
    rows = []
    for node in spec.get("nodes", []):
        row = {c: node.get(c) for c in NODE_COLUMNS}
        row["params"] = json.dumps(node["params"], sort_keys=True) if node.get("params") else ""
        rows.append(row)
    return pd.DataFrame(rows, columns=NODE_COLUMNS)


def edges_frame(spec: Mapping[str, Any]) -> pd.DataFrame:
    rows = [{c: e.get(c) for c in EDGE_COLUMNS} for e in spec.get("edges", [])]
    return pd.DataFrame(rows, columns=EDGE_COLUMNS)


class SpecTableError(ValueError):
    """A table cell that cannot become part of a spec; names the row and column."""


def _node_from_row(row: Mapping[str, Any], index: int) -> dict[str, Any]:
    node: dict[str, Any] = {}
    for col in ("id", "task", "model", "tool", "join"):
        if not _blank(row.get(col)):
            node[col] = str(row[col]).strip()
    for col in ("timeout_s", "retries"):
        if not _blank(row.get(col)):
            number = float(row[col])
            node[col] = int(number) if col == "retries" or number.is_integer() else number
    text = row.get("params")
    if not _blank(text):
        try:
            params = json.loads(str(text))
        except json.JSONDecodeError as exc:
            raise SpecTableError(f"nodes row {index + 1} params: not JSON ({exc.msg})") from exc
        if not isinstance(params, dict):
            raise SpecTableError(f"nodes row {index + 1} params: must be a JSON object")
        node["params"] = params
    return node


def spec_from_frames(
    base: Mapping[str, Any], nodes: pd.DataFrame, edges: pd.DataFrame
) -> dict[str, Any]:
    """``base`` with its nodes and edges replaced by the edited tables (blank rows dropped)."""
    spec = {k: v for k, v in base.items() if k not in ("nodes", "edges")}
    records = nodes.to_dict("records")
    spec["nodes"] = [_node_from_row(r, i) for i, r in enumerate(records) if not _blank(r.get("id"))]
    spec["edges"] = []
    for row in edges.to_dict("records"):
        if _blank(row.get("from")) or _blank(row.get("to")):
            continue
        edge = {"from": str(row["from"]).strip(), "to": str(row["to"]).strip()}
        if not _blank(row.get("when")):
            edge["when"] = str(row["when"]).strip()
        spec["edges"].append(edge)
    return spec


def problems_by_node(problems: Sequence[Mapping[str, str]], node_ids: Sequence[str]) -> dict:
    """Group validation problems by the node they concern (``"spec"`` for the rest)."""
    out: dict[str, list[str]] = {}
    for p in problems:
        loc, msg = str(p.get("location", "")), str(p.get("message", ""))
        owner = next((n for n in node_ids if _names_node(loc, msg, n)), "spec")
        out.setdefault(owner, []).append(f"{loc}: {msg}" if owner == "spec" else msg)
    return out


def _names_node(location: str, message: str, node: str) -> bool:
    marks = (f"[{node}]", f"'{node}'", f"{node}.", f'"{node}"')
    return location == node or any(m in location or m in message for m in marks)


def next_version(versions: Sequence[str]) -> str:
    """The next free version: one more than the largest integer version, else ``<last>.1``."""
    numbers = [int(v) for v in versions if str(v).isdigit()]
    if numbers:
        return str(max(numbers) + 1)
    return f"{versions[-1]}.1" if versions else "1"


def placement_key(row: Mapping[str, Any]) -> tuple[int, tuple[int, ...]]:
    return int(row["model_id"]), tuple(sorted(int(d) for d in row["device_ids"]))


def plan_diff(active: Sequence[Mapping], draft: Sequence[Mapping]) -> pd.DataFrame:
    """Rows added, removed or changed (replicas, pool) from ``active`` to ``draft``."""
    old = {placement_key(r): r for r in active}
    new = {placement_key(r): r for r in draft}
    rows = []
    for key in sorted(set(old) | set(new)):
        a, d = old.get(key), new.get(key)
        if a is None:
            change = "add"
        elif d is None:
            change = "remove"
        elif (a["replicas"], a["pool"]) != (d["replicas"], d["pool"]):
            change = "change"
        else:
            continue
        rows.append({"change": change, "model_id": key[0], "device_ids": list(key[1]),
                     "replicas_before": None if a is None else a["replicas"],
                     "replicas_after": None if d is None else d["replicas"],
                     "pool_before": None if a is None else a["pool"],
                     "pool_after": None if d is None else d["pool"]})  # fmt: skip
    cols = ["change", "model_id", "device_ids", "replicas_before", "replicas_after",
            "pool_before", "pool_after"]  # fmt: skip
    return pd.DataFrame(rows, columns=cols)


def tenant_standing(snapshot: Mapping[str, Any]) -> pd.DataFrame:
    """Per tenant: weight, virtual counter, runs, and the share of service received versus the
    share its weight entitles it to (both among the tenants shown)."""
    tenancy = snapshot.get("tenancy") or {}
    rows = [{"tenant": t["tenant_id"], "weight": t["weight"],
             "priority_class": t["priority_class"], "counter_milli": t.get("counter_milli") or 0,
             "queued_steps": t["queued_steps"], "waiting_runs": t["waiting_runs"],
             "in_flight_runs": t["in_flight_runs"], "borrowed_runs": t["borrowed_runs"]}
            for t in tenancy.get("tenants", [])]  # fmt: skip
    frame = pd.DataFrame(rows, columns=["tenant", "weight", "priority_class", "counter_milli",
                                        "queued_steps", "waiting_runs", "in_flight_runs",
                                        "borrowed_runs"])  # fmt: skip
    # The counter is service divided by weight, so service received is counter x weight.
    service = frame["counter_milli"].astype("int64") * frame["weight"].astype("int64")
    total_service, total_weight = int(service.sum()), int(frame["weight"].sum())
    frame["share_received"] = service / total_service if total_service else 0.0
    frame["share_entitled"] = frame["weight"] / total_weight if total_weight else 0.0
    return frame


def service_rates(history: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Weighted service per second of each tenant between the first and last samples of
    ``history`` (items: ``{"now": s, "counters": {tenant: counter_milli x weight}}``)."""
    if len(history) < 2:
        return {}
    first, last = history[0], history[-1]
    span = float(last["now"]) - float(first["now"])
    if span <= 0:
        return {}
    return {t: (v - first["counters"].get(t, 0)) / 1000.0 / span
            for t, v in last["counters"].items()}  # fmt: skip


def _waiting_steps(snapshot: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """(where, step view) of every waiting step: ``queue`` (bound to a replica), ``pending``
    (unbound: since late binding most waiting work is here) or ``unplaced``."""
    out = [("queue", s) for q in (snapshot.get("queues") or {}).values() for s in q]
    out += [("pending", s) for q in (snapshot.get("pending") or {}).values() for s in q]
    out += [("unplaced", s) for s in snapshot.get("unplaced") or []]
    return out


def waiting_reasons(snapshot: Mapping[str, Any], tenant: str | None = None) -> pd.DataFrame:
    """Every waiting step (queued, pending or unplaced: column ``waits_in``) with the core's
    explanation of why it waits, oldest first."""
    rows = [{"request_id": s["request_id"], "node": s["node_id"], "tenant": s["tenant_id"],
             "waits_in": where, "replica": s.get("replica_id"),
             "queued_since": s["queued_since"], "why": s["why"]}
            for where, s in _waiting_steps(snapshot)
            if tenant is None or s["tenant_id"] == tenant]  # fmt: skip
    frame = pd.DataFrame(rows, columns=["request_id", "node", "tenant", "waits_in", "replica",
                                        "queued_since", "why"])  # fmt: skip
    return frame.sort_values("queued_since", kind="stable").reset_index(drop=True)


WAIT_COLUMNS = ["queue", "pending", "unplaced"]


def waiting_counts(snapshot: Mapping[str, Any]) -> pd.DataFrame:
    """Per tenant: steps waiting in replica queues, pending (unbound) and unplaced, and their
    ``total``; tenants with nothing waiting are absent."""
    counts: dict[str, dict[str, int]] = {}
    for where, s in _waiting_steps(snapshot):
        own = counts.setdefault(s["tenant_id"], dict.fromkeys(WAIT_COLUMNS, 0))
        own[where] += 1
    rows = [{"tenant": t, **c, "total": sum(c.values())} for t, c in sorted(counts.items())]
    return pd.DataFrame(rows, columns=["tenant", *WAIT_COLUMNS, "total"])


def alerts(devices: Sequence[Mapping], snapshot: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """(severity, sentence) for devices down, quotas exhausted and headroom in use."""
    out = [("error", f"device {d['name']} is {d['status']}")
           for d in devices if d.get("status") not in ("up", "retired")]  # fmt: skip
    if snapshot:
        out += [("error", f"device {d['device_id']} is down in the live core")
                for d in snapshot.get("devices", []) if not d.get("up", True)]  # fmt: skip
        tenancy = snapshot.get("tenancy") or {}
        for t in tenancy.get("tenants", []):
            for q in t.get("quota", []):
                limit = q["nominal"] + (q["borrowing_limit"] or 0)
                if q["borrowing_limit"] is not None and q["used"] >= limit:
                    out.append(
                        (
                            "warning",
                            f"tenant {t['tenant_id']} exhausted its "
                            f"{q['resource']} quota ({q['used']}/{limit})",
                        )
                    )
        for h in tenancy.get("headroom", []):
            if h.get("used_slots", 0) > 0:
                out.append(
                    (
                        "info",
                        f"headroom {h['reservation_id']} in use: {h['used_slots']}"
                        f"/{h['reserved_slots']} reserved slots",
                    )
                )
    return out


def workflow_stats(requests: Sequence[Mapping], slo_s: float) -> pd.DataFrame:
    """Per workflow: finished runs, succeeded, p50/p95 end-to-end latency (s) and the share of
    succeeded runs within ``slo_s``."""
    cols = ["workflow", "runs", "succeeded", "rejected", "p50_s", "p95_s", "slo_attainment"]
    frame = pd.DataFrame(list(requests))
    if frame.empty:
        return pd.DataFrame(columns=cols)
    frame["workflow"] = frame["workflow_name"] + ":" + frame["workflow_version"]
    done = frame[frame["finished_at"].notna()].copy()
    latency = pd.to_datetime(done["finished_at"]) - pd.to_datetime(done["received_at"])
    done["latency_s"] = latency.dt.total_seconds()
    rows = []
    for name, group in frame.groupby("workflow", sort=True):
        ok = done[(done["workflow"] == name) & (done["status"] == "succeeded")]["latency_s"]
        rows.append({"workflow": name, "runs": len(group),
                     "succeeded": int((group["status"] == "succeeded").sum()),
                     "rejected": int((group["status"] == "rejected").sum()),
                     "p50_s": float(ok.quantile(0.5)) if len(ok) else None,
                     "p95_s": float(ok.quantile(0.95)) if len(ok) else None,
                     "slo_attainment": float((ok <= slo_s).mean()) if len(ok) else None})  # fmt: skip
    return pd.DataFrame(rows, columns=cols)


def headroom_preview(
    devices: Sequence[Mapping], selector: Mapping[str, Any], reserved_milli: int
) -> pd.DataFrame:
    """Devices a selector covers and the memory the reservation would hold back on each."""
    want_ids = set(selector.get("device_ids") or [])
    accel = selector.get("accelerator")
    labels = selector.get("labels") or {}
    rows = []
    for d in devices:
        if want_ids and d["id"] not in want_ids:
            continue
        if accel and d.get("accelerator") != accel:
            continue
        if any((d.get("labels") or {}).get(k) != v for k, v in labels.items()):
            continue
        held = d["memory_mib"] * reserved_milli // 1000
        rows.append({"device": d["name"], "accelerator": d.get("accelerator"),
                     "memory_mib": d["memory_mib"], "reserved_mib": held,
                     "usable_mib": d["memory_mib"] - held})  # fmt: skip
    return pd.DataFrame(rows, columns=["device", "accelerator", "memory_mib", "reserved_mib",
                                       "usable_mib"])  # fmt: skip
