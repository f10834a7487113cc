"""Edits of a workflow draft (pure: each returns a new spec dict, the input stays unchanged).

An edit the draft cannot take raises :class:`DraftError` naming the field it concerns, so the
side panel shows the refusal next to that field and the draft stays as it was. Whether the
resulting spec is a sound workflow is the API validator's call, not these functions'.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from app.dag_graph import INPUT, TASKS, guess_edge, ref_node

_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")


class DraftError(ValueError):
    """An edit refused before it reaches the draft; ``field`` is the panel field it concerns."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def node_ids(spec: Mapping[str, Any]) -> list[str]:
    return [str(n.get("id")) for n in spec.get("nodes") or []]


def add_node(spec: Mapping[str, Any], node_id: str, kind: str) -> dict[str, Any]:
    """``spec`` plus an unconnected node ``node_id`` running ``kind`` (a task or a tool)."""
    node_id = node_id.strip()
    if not _ID.match(node_id):
        raise DraftError("id", "start with a letter; letters, digits, '_' and '-' only")
    if node_id == INPUT or node_id in node_ids(spec):
        raise DraftError("id", f"a node {node_id!r} exists already")
    out = copy.deepcopy(dict(spec))
    out.setdefault("nodes", []).append({"id": node_id, ("task" if kind in TASKS else "tool"): kind})
    out.setdefault("edges", [])
    return out


def remove_node(spec: Mapping[str, Any], node_id: str) -> dict[str, Any]:
    """``spec`` without ``node_id``, its edges and the outputs it fed."""
    out = copy.deepcopy(dict(spec))
    out["nodes"] = [n for n in out.get("nodes") or [] if str(n.get("id")) != node_id]
    out["edges"] = [e for e in out.get("edges") or []
                    if node_id not in (ref_node(e.get("from")), ref_node(e.get("to")))]  # fmt: skip
    outputs = out.get("outputs") or {}
    out["outputs"] = {k: v for k, v in outputs.items() if ref_node(v) != node_id}
    return out


def parse_params(text: str) -> dict[str, Any]:
    """Node params from JSON or YAML text ("" is no params); DraftError on ``params``."""
    if not text.strip():
        return {}
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise DraftError("params", f"not JSON or YAML ({exc.__class__.__name__})") from exc
    if not isinstance(value, dict):
        raise DraftError("params", "must be a mapping (a JSON object)")
    return value


def params_text(node: Mapping[str, Any]) -> str:
    return json.dumps(node["params"], indent=1) if node.get("params") else ""


def update_node(spec: Mapping[str, Any], node_id: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """``spec`` with ``fields`` set on ``node_id``; a None or "" value removes the key. A
    ``kind`` field sets ``task`` or ``tool`` (and drops the other, and ``model`` for a tool)."""
    out = copy.deepcopy(dict(spec))
    node = next((n for n in out.get("nodes") or [] if str(n.get("id")) == node_id), None)
    if node is None:
        raise DraftError("id", f"no node {node_id!r} in the draft")
    changes = dict(fields)
    if "kind" in changes:
        kind = changes.pop("kind")
        is_task = kind in TASKS
        changes.update(task=kind if is_task else None, tool=None if is_task else kind)
        if not is_task:
            changes["model"] = None
    for key, value in changes.items():
        if value is None or value == "" or value == {}:
            node.pop(key, None)
        else:
            node[key] = value
    return out


def set_when(spec: Mapping[str, Any], node_id: str, when: str) -> dict[str, Any]:
    """The router label ``when`` on every edge into ``node_id`` ("" removes it)."""
    out = copy.deepcopy(dict(spec))
    for edge in out.get("edges") or []:
        if ref_node(edge.get("to")) == node_id:
            if when.strip():
                edge["when"] = when.strip()
            else:
                edge.pop("when", None)
    return out


def incoming(spec: Mapping[str, Any], node_id: str) -> list[str]:
    """The nodes (``input`` included) that ``node_id`` depends on, in edge order."""
    found: list[str] = []
    for edge in spec.get("edges") or []:
        source = ref_node(edge.get("from"))
        if ref_node(edge.get("to")) == node_id and source not in found:
            found.append(source)
    return found


def set_dependencies(
    spec: Mapping[str, Any], node_id: str, sources: Iterable[str]
) -> dict[str, Any]:
    """``node_id`` fed by exactly ``sources``: edges from other nodes dropped, one guessed edge
    added per new source (as when an arrow is drawn on the canvas)."""
    wanted = [s for s in sources if s != node_id]
    unknown = [s for s in wanted if s != INPUT and s not in node_ids(spec)]
    if unknown:
        raise DraftError("depends_on", f"no node {unknown[0]!r} in the draft")
    out = copy.deepcopy(dict(spec))
    out["edges"] = [e for e in out.get("edges") or []
                    if ref_node(e.get("to")) != node_id or ref_node(e.get("from")) in wanted]  # fmt: skip
    for source in wanted:
        if source not in incoming(out, node_id):
            out["edges"].append(guess_edge(out, source, node_id))
    return out
