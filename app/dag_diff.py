"""What changed between two versions of a workflow spec (pure; the Versions panel shows it).

Nodes are matched by id and edges by their ``from``/``to``/``when``; a node whose settings
differ is "changed" with the keys that differ. Inputs and outputs are compared as wholes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Columns of :func:`diff_specs`'s rows.
COLUMNS = ["part", "name", "change", "detail"]


def _nodes(spec: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {str(n.get("id")): n for n in spec.get("nodes") or [] if isinstance(n, Mapping)}


def _edge_text(edge: Mapping[str, Any]) -> str:
    text = f"{edge.get('from')} → {edge.get('to')}"
    return f"{text} [when {edge['when']}]" if edge.get("when") else text


def _changed_keys(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    return ", ".join(f"{k}: {old.get(k)!r} → {new.get(k)!r}" for k in keys)


def diff_specs(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[dict[str, str]]:
    """Rows ``{part, name, change, detail}`` turning ``old`` into ``new`` (empty: the same)."""
    rows: list[dict[str, str]] = []
    before, after = _nodes(old), _nodes(new)
    for nid in after.keys() - before.keys():
        rows.append({"part": "node", "name": nid, "change": "added", "detail": ""})
    for nid in before.keys() - after.keys():
        rows.append({"part": "node", "name": nid, "change": "removed", "detail": ""})
    for nid in sorted(before.keys() & after.keys()):
        if before[nid] != after[nid]:
            rows.append({"part": "node", "name": nid, "change": "changed",
                         "detail": _changed_keys(before[nid], after[nid])})  # fmt: skip
    old_edges = {_edge_text(e) for e in old.get("edges") or [] if isinstance(e, Mapping)}
    new_edges = {_edge_text(e) for e in new.get("edges") or [] if isinstance(e, Mapping)}
    rows += [{"part": "edge", "name": e, "change": "added", "detail": ""}
             for e in sorted(new_edges - old_edges)]  # fmt: skip
    rows += [{"part": "edge", "name": e, "change": "removed", "detail": ""}
             for e in sorted(old_edges - new_edges)]  # fmt: skip
    for part in ("inputs", "outputs"):
        if (old.get(part) or {}) != (new.get(part) or {}):
            rows.append({"part": part, "name": part, "change": "changed",
                         "detail": f"{old.get(part)!r} → {new.get(part)!r}"})  # fmt: skip
    order = {"added": 0, "removed": 1, "changed": 2}
    return sorted(rows, key=lambda r: (r["part"] != "node", order[r["change"]], r["name"]))
