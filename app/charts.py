"""Pure Plotly figure builders: data in, ``go.Figure`` out (no Streamlit, no HTTP).

Each builder accepts an empty input and returns a figure that says so, so a page never has to
special-case "nothing yet".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go

OK, BAD, MUTED = "#2a9d8f", "#e63946", "#8d99ae"
KIND_COLORS = {"model": "#457b9d", "tool": "#f4a261", "input": MUTED, "output": MUTED}


def _empty(title: str, note: str) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(title=title, height=260, xaxis_visible=False, yaxis_visible=False,
                      annotations=[{"text": note, "showarrow": False, "font": {"size": 14}}])  # fmt: skip
    return fig


def placement_map(
    placements: Sequence[Mapping], devices: Mapping[int, str], models: Mapping[int, str]
) -> go.Figure:
    """Device x model map of a plan: the number of replicas of each model on each device."""
    if not placements:
        return _empty("Placement", "no placements in this plan")
    counts: dict[tuple[str, str], int] = {}
    for p in placements:
        model = models.get(p["model_id"], f"model {p['model_id']}")
        for dev in p["device_ids"]:
            key = (devices.get(dev, f"device {dev}"), model)
            counts[key] = counts.get(key, 0) + int(p["replicas"])
    xs = sorted({d for d, _ in counts})
    ys = sorted({m for _, m in counts})
    z = [[counts.get((x, y), 0) for x in xs] for y in ys]
    text = [[str(v) if v else "" for v in row] for row in z]
    fig = go.Figure(go.Heatmap(z=z, x=xs, y=ys, text=text, texttemplate="%{text}",
                               colorscale="Blues", showscale=False, xgap=2, ygap=2))  # fmt: skip
    fig.update_layout(title="Replicas per device and model", height=160 + 40 * len(ys))
    return fig


def _depths(nodes: Sequence[str], edges: Sequence[tuple[str, str]]) -> dict[str, int]:
    """Longest distance from the inputs, so every edge points rightwards."""
    depth = dict.fromkeys(nodes, 0)
    for _ in range(len(nodes)):
        changed = False
        for src, dst in edges:
            if src in depth and dst in depth and depth[dst] < depth[src] + 1:
                depth[dst] = depth[src] + 1
                changed = True
        if not changed:
            break
    return depth


def _graph(spec: Mapping[str, Any]) -> tuple[list[str], list[tuple[str, str, str]]]:
    ids = [str(n.get("id")) for n in spec.get("nodes", [])]
    names = ["input", *ids, "output"]
    links = []
    for e in spec.get("edges", []):
        src, dst = str(e.get("from", "")).split(".")[0], str(e.get("to", "")).split(".")[0]
        links.append((src, dst, str(e.get("when") or "")))
    for out in (spec.get("outputs") or {}).values():
        links.append((str(out).split(".")[0], "output", ""))
    return names, links


def dag_figure(
    spec: Mapping[str, Any], problems: Mapping[str, Sequence[str]] | None = None
) -> go.Figure:
    """The workflow as a left-to-right graph; nodes with validation problems are red and
    their messages show on hover; conditional edges carry their condition."""
    if not spec.get("nodes"):
        return _empty("Workflow", "no nodes")
    problems = problems or {}
    names, links = _graph(spec)
    depth = _depths(names, [(s, d) for s, d, _ in links])
    depth["output"] = max(depth.values()) + 1
    per_level: dict[int, list[str]] = {}
    for n in names:
        per_level.setdefault(depth[n], []).append(n)
    pos = {
        n: (lvl, i - (len(ns) - 1) / 2) for lvl, ns in per_level.items() for i, n in enumerate(ns)
    }
    fig = go.Figure()
    for src, dst, when in links:
        if src not in pos or dst not in pos:
            continue
        (x0, y0), (x1, y1) = pos[src], pos[dst]
        fig.add_annotation(x=x1, y=y1, ax=x0, ay=y0, xref="x", yref="y", axref="x", ayref="y",
                           showarrow=True, arrowhead=2, arrowwidth=1.5, arrowcolor=MUTED,
                           standoff=18, startstandoff=18)  # fmt: skip
        if when:
            fig.add_annotation(x=(x0 + x1) / 2, y=(y0 + y1) / 2, text=f"when {when}",
                               showarrow=False, yshift=10, bgcolor="rgba(255,255,255,0.8)",
                               font={"size": 11, "color": "#6c757d"})  # fmt: skip
    kinds = {str(n.get("id")): ("tool" if n.get("tool") else "model") for n in spec["nodes"]}
    detail = {str(n.get("id")): n.get("model") or n.get("tool") or "" for n in spec["nodes"]}
    colors = [BAD if problems.get(n) else KIND_COLORS[kinds.get(n, "input")] for n in names]
    hover = [
        f"<b>{n}</b> {detail.get(n, '')}<br>" + "<br>".join(problems.get(n, [])) for n in names
    ]
    fig.add_trace(go.Scatter(
        x=[pos[n][0] for n in names], y=[pos[n][1] for n in names], mode="markers+text",
        text=names, textposition="top center", hovertext=hover, hoverinfo="text",
        marker={"size": 28, "color": colors, "line": {"width": 1, "color": "#1d3557"}},
    ))  # fmt: skip
    fig.update_layout(title="Workflow graph (red: has problems)", showlegend=False, height=380,
                      xaxis_visible=False, yaxis_visible=False, margin={"l": 10, "r": 10})  # fmt: skip
    return fig


def inventory_sunburst(devices: Sequence[Mapping], nodes: Mapping[int, str]) -> go.Figure:
    """Node -> interconnect domain -> device, sized by memory, coloured by health."""
    if not devices:
        return _empty("Inventory", "no devices")
    ids, parents, values, colors, labels = [], [], [], [], []
    seen: set[str] = set()
    for d in devices:
        node = nodes.get(d["node_id"], f"node {d['node_id']}")
        group = f"{node}/{d.get('interconnect_group') or 'none'}"
        for item, parent, label in (
            (node, "", node),
            (group, node, d.get("interconnect_group") or "none"),
        ):
            if item not in seen:
                seen.add(item)
                ids.append(item), parents.append(parent), values.append(0)
                colors.append("#dee2e6"), labels.append(label)
        ids.append(f"{group}/{d['name']}"), parents.append(group), labels.append(d["name"])
        values.append(d["memory_mib"]), colors.append(OK if d["status"] == "up" else BAD)
    fig = go.Figure(go.Sunburst(ids=ids, parents=parents, values=values, labels=labels,
                                marker={"colors": colors}, branchvalues="remainder"))  # fmt: skip
    fig.update_layout(title="Inventory: node / interconnect / device (size: memory)", height=420)
    return fig


def memory_heatmap(history: Sequence[Mapping[str, Any]]) -> go.Figure:
    """Devices (rows) x time (columns): memory in use as a share of the device's memory.
    ``history`` items: ``{"t": seconds, "devices": {device: used/total}}``."""
    if not history:
        return _empty("Memory over time", "no live samples yet (is the runtime running?)")
    devices = sorted({d for h in history for d in h["devices"]})
    z = [[h["devices"].get(d) for h in history] for d in devices]
    few = len(history) <= 12  # with few samples, print the share in each cell
    latest = history[-1]["t"]  # the core's clock has an arbitrary origin: show "seconds ago"
    fig = go.Figure(go.Heatmap(z=z, x=[round(h["t"] - latest, 1) for h in history], y=devices,
                               zmin=0, zmax=1,
                               colorscale="YlOrRd", colorbar={"title": "used", "tickformat": ".0%"},
                               texttemplate="%{z:.1%}" if few else None,
                               hovertemplate="%{y} at %{x} s: %{z:.1%} used<extra></extra>"))  # fmt: skip
    fig.update_layout(title="Memory in use over time", xaxis_title="seconds (0 = latest sample)",
                      height=300)  # fmt: skip
    return fig


def share_bars(standing: pd.DataFrame) -> go.Figure:
    """Per tenant: share of service received next to the share its weight entitles it to."""
    if standing.empty:
        return _empty("Fair share", "no tenants in the live core")
    fig = go.Figure([
        go.Bar(name="received", x=standing["tenant"], y=standing["share_received"], marker_color="#457b9d"),
        go.Bar(name="entitled", x=standing["tenant"], y=standing["share_entitled"], marker_color=MUTED),
    ])  # fmt: skip
    fig.update_layout(title="Share of service: received vs entitled", barmode="group",
                      yaxis_tickformat=".0%", height=320)  # fmt: skip
    return fig


def queue_depth_lines(history: Sequence[Mapping[str, Any]]) -> go.Figure:
    """Queued steps per tenant over time (``{"t": s, "queued": {tenant: n}}`` items)."""
    if not history:
        return _empty("Queue depth", "no samples yet")
    tenants = sorted({t for h in history for t in h["queued"]})
    latest = history[-1]["t"]  # the core's clock has an arbitrary origin: show "seconds ago"
    fig = go.Figure([go.Scatter(x=[round(h["t"] - latest, 1) for h in history],
                                y=[h["queued"].get(t, 0) for h in history],
                                mode="lines", name=t) for t in tenants])  # fmt: skip
    fig.update_layout(title="Queued steps per tenant", xaxis_title="seconds (0 = latest sample)",
                      yaxis_rangemode="tozero", height=320)  # fmt: skip
    return fig


def quota_bars(rows: Sequence[Mapping[str, Any]]) -> go.Figure:
    """Current use as a share of the nominal quota per tenant and resource (units differ
    between resources, so shares are comparable where raw numbers are not)."""
    if not rows:
        return _empty("Quota use", "no quota figures")
    labels = [f"{r['tenant']} {r['resource']}" for r in rows]
    shares = [r["used"] / r["nominal"] if r["nominal"] else 0.0 for r in rows]
    fig = go.Figure(go.Bar(
        x=labels, y=shares, marker_color=[BAD if s >= 1 else "#457b9d" for s in shares],
        customdata=[[r["used"], r["nominal"]] for r in rows],
        hovertemplate="%{x}: %{customdata[0]} of %{customdata[1]}<extra></extra>",
    ))  # fmt: skip
    fig.update_layout(title="Use as a share of the nominal quota", yaxis_tickformat=".0%",
                      yaxis_range=[0, max(1.0, *shares)], height=320)  # fmt: skip
    return fig


def usage_bars(frame: pd.DataFrame) -> go.Figure:
    """Cost units per tenant, stacked by day (``tenant``, ``day``, ``cost_units`` columns)."""
    if frame.empty:
        return _empty("Usage", "no usage in this period")
    fig = go.Figure([go.Bar(name=str(day), x=g["tenant"], y=g["cost_units"])
                     for day, g in frame.groupby("day", sort=True)])  # fmt: skip
    fig.update_layout(title="Cost units per tenant", barmode="stack", height=320)
    return fig


def workflow_bars(stats: pd.DataFrame) -> go.Figure:
    """Runs and p95 latency per workflow."""
    if stats.empty:
        return _empty("Workflows", "no runs yet")
    fig = go.Figure([
        go.Bar(name="runs", x=stats["workflow"], y=stats["runs"], marker_color="#457b9d"),
        go.Scatter(name="p95 s", x=stats["workflow"], y=stats["p95_s"], yaxis="y2",
                   mode="markers", marker={"size": 12, "color": BAD}),
    ])  # fmt: skip
    fig.update_layout(title="Runs and p95 latency per workflow", height=320,
                      yaxis2={"overlaying": "y", "side": "right", "title": "p95 s"})  # fmt: skip
    return fig


def whatif_bars(
    deltas: Sequence[Mapping[str, Any]], variant: str, labels: Mapping[str, str] | None = None
) -> go.Figure:
    """The variant's change against the baseline per figure, in percent of the baseline (so
    seconds, ratios and counts share one axis), with the 95% interval of the paired delta;
    green better, red worse, blue not distinguishable. Figures with a zero baseline are left
    out (no relative change exists)."""
    shown = [d for d in deltas if d.get("baseline")]
    if not shown:
        return _empty(f"Baseline vs {variant}", "no results yet")
    labels = labels or {}
    fig = go.Figure(go.Bar(
        x=[labels.get(d["metric"], d["metric"]) for d in shown],
        y=[100 * d["delta"] / abs(d["baseline"]) for d in shown],
        error_y={"type": "data", "array": [100 * d.get("ci95", 0) / abs(d["baseline"]) for d in shown]},
        marker_color=[OK if d.get("better") else BAD if d.get("better") is False else "#457b9d"
                      for d in shown],
    ))  # fmt: skip
    fig.update_layout(title=f"{variant}: change vs baseline (%)", height=340,
                      yaxis_title="% of baseline", margin={"t": 50, "b": 10})  # fmt: skip
    return fig
