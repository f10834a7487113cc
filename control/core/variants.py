"""Precision variants of a model (issue 27): how their keys are spelled and what a request asks.

A model ``name:version`` may be registered with precision variants (``bf16``, ``int8``...).
Each variant is a replica kind of its own, keyed ``name:version@precision``: placed, loaded,
routed, batched, profiled and billed apart from the base model, which keeps its plain key.
A workflow node always names the base key; which variant runs a step is decided per request
from its quality class (``exact``, ``balanced`` or ``fast``).
"""

from __future__ import annotations

#: What a request may ask of a model with variants: the base model only (``exact``, or a
#: variant whose measured quality passes the floor), a variant of measured quality
#: (``balanced``), or the cheapest variant (``fast``).
QUALITY_CLASSES: tuple[str, ...] = ("exact", "balanced", "fast")
#: Separates a variant's precision from its base model's key.
VARIANT_SEP = "@"


def variant_key(base_key: str, precision: str) -> str:
    """The key of ``base_key``'s variant at ``precision`` (``minilm:1@int8``)."""
    if VARIANT_SEP in base_key:
        raise ValueError(f"{base_key!r} is already a variant key")
    return f"{base_key}{VARIANT_SEP}{precision}"


def base_of(key: str) -> str:
    """The base model's key of ``key`` (``key`` itself when it is a base key)."""
    return key.split(VARIANT_SEP, 1)[0]


def precision_of(key: str) -> str | None:
    """The variant precision in ``key``; None for a base key."""
    _, sep, precision = key.partition(VARIANT_SEP)
    return precision if sep else None
