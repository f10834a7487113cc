"""Declarative field rules: each service lists the checks its fields must pass.

A rule only looks at the values being written, so validation is pure and happens before the
database is touched. ``None`` passes every rule except ``required``: nullability and required
fields are handled by the service from the table definition.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from control.services.errors import ValidationError


def is_int(value: Any) -> bool:
    """An integer that is not a bool (True would otherwise pass as 1)."""
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class Rule:
    """``field`` must satisfy ``check``; otherwise ValidationError(field, value, message)."""

    field: str
    check: Callable[[Any], bool]
    message: str

    def apply(self, values: Mapping[str, Any]) -> None:
        value = values.get(self.field)
        if self.field in values and value is not None and not self.check(value):
            raise ValidationError(self.field, value, self.message)


def validate(rules: Collection[Rule], values: Mapping[str, Any]) -> None:
    """Apply every rule to ``values``; the first failure raises."""
    for rule in rules:
        rule.apply(values)


def text(field: str, max_len: int = 200) -> Rule:
    return Rule(
        field,
        lambda v: isinstance(v, str) and 0 < len(v.strip()) and len(v) <= max_len,
        f"must be a non-empty string of at most {max_len} characters",
    )


def free_text(field: str) -> Rule:
    return Rule(field, lambda v: isinstance(v, str), "must be a string")


def at_least(field: str, low: int) -> Rule:
    return Rule(field, lambda v: is_int(v) and v >= low, f"must be an integer >= {low}")


def positive(field: str) -> Rule:
    return Rule(field, lambda v: is_int(v) and v > 0, "must be an integer > 0")


def between(field: str, low: int, high: int) -> Rule:
    return Rule(
        field, lambda v: is_int(v) and low <= v <= high, f"must be an integer in [{low}, {high}]"
    )


def one_of(field: str, allowed: tuple[str, ...]) -> Rule:
    return Rule(field, lambda v: v in allowed, f"must be one of {', '.join(allowed)}")


def each_of(field: str, allowed: tuple[str, ...]) -> Rule:
    return Rule(
        field,
        lambda v: isinstance(v, list) and all(item in allowed for item in v),
        f"must be a list of values from {', '.join(allowed)}",
    )


def mapping(field: str) -> Rule:
    return Rule(field, lambda v: isinstance(v, dict), "must be a JSON object")


def boolean(field: str) -> Rule:
    return Rule(field, lambda v: isinstance(v, bool), "must be true or false")
