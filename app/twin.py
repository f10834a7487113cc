"""Pure tables and sentences about twin predictions: delta tables with intervals, the twin's
measured error beside each figure, and the request bodies of previews. No Streamlit, no I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

#: Figure of a what-if comparison -> how the console names it (in this order).
FIGURES: dict[str, str] = {
    "all.e2e_p50_s": "p50 latency (s)",
    "all.e2e_p99_s": "p99 latency (s)",
    "all.ttft_p99_s": "p99 time to first token (s)",
    "all.slo_attainment": "SLO attainment",
    "all.throughput_rps": "throughput (req/s)",
    "fleet.headroom_in_use": "headroom in use",
    "all.rejected": "rejected requests",
    "fairness.jain": "fairness (Jain)",
    "fleet.cost_units_per_1k_tokens": "cost units per 1k tokens",
}
#: Figure -> the fidelity report's error that bounds it.
ERROR_OF: dict[str, str] = {
    "all.e2e_p50_s": "p50_error",
    "all.e2e_p99_s": "p99_error",
    "all.ttft_p99_s": "p99_error",
    "all.slo_attainment": "slo_attainment_error_pp",
}
DELTA_COLUMNS = ["variant_name", "figure", "baseline", "variant", "delta", "ci95", "verdict",
                 "twin_error"]  # fmt: skip
FINAL = ("succeeded", "failed")


def _error_text(report: Mapping[str, Any] | None, key: str | None) -> str:
    if report is None:
        return "not validated yet"
    if key is None:
        return "not measured"
    value = abs(float(report[key]))  # the SLO error is signed (twin minus live); show its size
    return f"±{value:.1f} pp" if key.endswith("_pp") else f"±{value * 100:.0f}%"


def twin_error_sentence(report: Mapping[str, Any] | None, reason: str = "") -> str:
    """One line saying how far the twin was from the live stack at its last validation, or
    that it was never validated (``reason``: the API's explanation)."""
    if report is None:
        why = f" ({reason})" if reason else ""
        return f"Twin not validated yet{why}: treat its predictions as unverified."
    day = str(report.get("created_at", ""))[:16].replace("T", " ")
    return (
        f"Twin error (last validation {day}: {where(report)}): "
        f"p50 {_error_text(report, 'p50_error')}, p99 {_error_text(report, 'p99_error')}, "
        f"SLO {_error_text(report, 'slo_attainment_error_pp')}"
    )


def where(report: Mapping[str, Any]) -> str:
    """What the last validation ran: workflow, trace and offered load."""
    load = report.get("load")
    at = f" at load {load:g}" if isinstance(load, int | float) else ""
    return f"workflow {report.get('workflow', 'embed')} on trace {report.get('trace', '?')}{at}"


def _verdict(better: bool | None) -> str:
    return {True: "better", False: "worse", None: "no clear change"}[better]


def delta_frame(
    comparisons: Sequence[Mapping[str, Any]], report: Mapping[str, Any] | None
) -> pd.DataFrame:
    """One row per (variant, figure) in FIGURES order: baseline and variant means, the paired
    delta with its 95% half-interval, the verdict and the twin's measured error for it."""
    rows = []
    for comp in comparisons:
        by_metric = {d["metric"]: d for d in comp.get("deltas", [])}
        for metric, label in FIGURES.items():
            d = by_metric.get(metric)
            if d is None:
                continue
            rows.append({
                "variant_name": comp.get("variant", "variant"), "figure": label,
                "baseline": d["baseline"], "variant": d["variant"], "delta": d["delta"],
                "ci95": d["ci95"], "verdict": _verdict(d.get("better")),
                "twin_error": _error_text(report, ERROR_OF.get(metric)),
            })  # fmt: skip
    return pd.DataFrame(rows, columns=DELTA_COLUMNS)


def headroom_body(
    name: str, scope: str, accelerator: str | None, device_ids: list[int], percent: float,
    classes: list[str], borrowable: bool,
) -> dict[str, Any]:  # fmt: skip
    """The reservation as the API stores it (``reserved_milli`` in thousandths)."""
    selector = {"accelerator": {"accelerator": accelerator}, "all": {"labels": {}},
                "devices": {"device_ids": list(device_ids)}}[scope]  # fmt: skip
    return {"name": name, "selector": selector, "reserved_milli": int(round(percent * 10)),
            "allowed_classes": list(classes), "borrowable": borrowable}  # fmt: skip


def preview_request(
    variant: str, changes: Mapping[str, Any], trace_name: str | None, seeds: int,
    max_requests: int,
) -> dict[str, Any]:  # fmt: skip
    """A what-if request comparing the state in force now with one variant, started at once:
    a short slice of a stored trace over a few seeds so that it answers in seconds."""
    workload: dict[str, Any] = {"max_requests": max_requests}
    if trace_name:  # none: the twin's default, the shipped Azure slice
        workload["trace_name"] = trace_name
    scenario = {"baseline": "active", "workload": workload, "variants": {variant: dict(changes)},
                "seeds": list(range(seeds))}  # fmt: skip
    return {"scenario": scenario, "submit": True}
