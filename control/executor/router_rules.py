"""Keyword router rules, shared by the executor's router adapter and the runtime's host tool.

Pure functions (no torch), so the driver's process can route without loading a model stack.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def parse_router_rules(rules: Sequence[Any]) -> list[tuple[str, list[str]]]:
    """Router rules as (label, lower-cased keywords). Accepts ``{"label", "keywords"}``
    mappings (the workflow spec's form) and ``[label, [keywords]]`` pairs."""
    out = []
    for rule in rules or ():
        if isinstance(rule, Mapping):
            label, words = rule.get("label"), rule.get("keywords", ())
        else:
            label, words = rule[0], rule[1]
        out.append((str(label), [str(w).lower() for w in words]))
    return out


def route_label(text: str, rules: Sequence[tuple[str, list[str]]], default: str) -> str:
    """The first rule with a keyword in ``text`` (case-insensitive) wins, else ``default``."""
    lowered = text.lower()
    for label, words in rules:
        if any(w in lowered for w in words):
            return label
    return default
