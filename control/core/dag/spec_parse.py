"""The parts of a workflow spec dict, read with every malformed value reported at its place.

``dag_from_dict`` (in ``spec``) calls these for each node, edge and mapping; each appends
'location: message' problems (``nodes[emb].retries: expected an integer, got 'abc'``) to the
list it is given and returns a usable stand-in, so that one pass finds every problem of a spec
instead of stopping at the first (or crashing on a value ``int()`` or ``dict()`` refuses).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType

from control.core.dag.spec import EdgeSpec, NodeSpec

_TEXT_FIELDS = ("task", "model", "tool", "priority_class", "map_over")


def node_from_dict(i: int, raw: object, problems: list[str]) -> NodeSpec:
    """Node ``i`` of the spec; its problems are located ``nodes[<id>].<field>``."""
    if not isinstance(raw, Mapping) or "id" not in raw:
        problems.append(f"nodes[{i}]: expected a mapping with an 'id', got {raw!r}")
        return NodeSpec(node_id=f"#{i}")
    node_id = str(raw["id"])
    where = f"nodes[{node_id}]"
    text = {f: _text(raw.get(f), f"{where}.{f}", problems) for f in _TEXT_FIELDS}
    params = raw.get("params")
    if params is not None and not isinstance(params, Mapping):
        problems.append(f"{where}.params: expected a mapping, got {params!r}")
        params = None
    return NodeSpec(
        node_id=node_id,
        join=_text(raw.get("join", "all"), f"{where}.join", problems) or "all",
        retries=_integer(raw.get("retries", 0), f"{where}.retries", problems),
        timeout_s=_number(raw.get("timeout_s"), f"{where}.timeout_s", problems),
        deadline_s=_number(raw.get("deadline_s"), f"{where}.deadline_s", problems),
        params=MappingProxyType(dict(params or {})),
        **text,
    )


def edge_from_dict(i: int, raw: object, problems: list[str]) -> EdgeSpec:
    """Edge ``i`` of the spec; its problems are located ``edges[i].<from|to|when>``."""
    if not isinstance(raw, Mapping):
        problems.append(f"edges[{i}]: expected a mapping, got {raw!r}")
        return EdgeSpec("?", "?", "?", "?")
    src, sf = _ref(raw.get("from"), f"edges[{i}].from", problems)
    dst, df = _ref(raw.get("to"), f"edges[{i}].to", problems)
    when = raw.get("when")
    return EdgeSpec(src, sf, dst, df, None if when is None else str(when))


def str_map(raw: object, where: str, problems: list[str]) -> Mapping[str, str]:
    """A read-only str -> str copy of an optional mapping (``inputs``, ``outputs``)."""
    if raw is None:
        return MappingProxyType({})
    if not isinstance(raw, Mapping):
        problems.append(f"{where}: expected a mapping, got {raw!r}")
        return MappingProxyType({})
    return MappingProxyType({str(k): str(v) for k, v in raw.items()})


def _ref(ref: object, where: str, problems: list[str]) -> tuple[str, str]:
    if not isinstance(ref, str) or ref.count(".") != 1:
        problems.append(f"{where}: expected 'node.field', got {ref!r}")
        return "?", "?"
    node, fld = ref.split(".")
    return node, fld


def _text(value: object, where: str, problems: list[str]) -> str | None:
    if value is None or isinstance(value, str):
        return value
    problems.append(f"{where}: expected a string, got {value!r}")
    return None


def _integer(value: object, where: str, problems: list[str]) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    problems.append(f"{where}: expected an integer, got {value!r}")
    return 0


def _number(value: object, where: str, problems: list[str]) -> float | None:
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    problems.append(f"{where}: expected a finite number of seconds, got {value!r}")
    return None
