"""A configuration field whose annotation the native build erased to ``type`` is read from its
source: the policy document checks values against ``float | None``, not ``type`` (with the
compiled core, every such field of CoreConfig refused every value)."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import TypeAdapter

from control.services.field_types import field_types


@dataclass(frozen=True)
class Erased:
    idle_s: float | None = None
    count: int = 1


Erased.__annotations__["idle_s"] = type  # what mypyc leaves on a compiled class


def test_an_erased_annotation_is_read_from_the_source() -> None:
    hints = field_types(Erased)
    assert hints["idle_s"] == float | None
    assert hints["count"] is int
    adapter = TypeAdapter(hints["idle_s"])
    assert adapter.validate_python(2.5, strict=True) == 2.5
    assert adapter.validate_python(None, strict=True) is None
