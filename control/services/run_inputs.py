"""Workflow inputs checked at submission, before anything is recorded, queued or billed.

A workflow declares its inputs (``{"query": "text"}``; a type ending in ``?`` is optional) in
the port-type vocabulary of :data:`control.core.dag.spec.PORTS`. :func:`input_problems` is a
pure function of (declared inputs, given inputs, limits) returning every problem as
``(field, message)``; :func:`check_inputs` raises the first as a ``ValidationError`` naming the
field (the API answers 422). Unknown fields are refused: a typo must not silently leave a
required input unset (which would otherwise wait for an input that never comes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from control.config import get_settings
from control.services.errors import ValidationError


@dataclass(frozen=True)
class InputLimits:
    """Size bounds of one run's inputs; the service's are the settings'
    (``LEGATO_MAX_INPUT_TEXT_CHARS``, ``LEGATO_MAX_INPUT_LIST_ITEMS``, see :func:`configured`)."""

    #: one text value (a query, a prompt, one document); the edge schemas allow a prompt or a
    #: chat message of this size too, and a 1 MiB body (LEGATO_MAX_BODY_BYTES) bounds it anyway
    max_text_chars: int = 200_000
    max_list_items: int = 1_000  # one list value (documents, a vector, scores)


def configured() -> InputLimits:
    """The limits of the process-wide settings (read from the environment once)."""
    settings = get_settings()
    return InputLimits(max_text_chars=settings.max_input_text_chars,
                       max_list_items=settings.max_input_list_items)  # fmt: skip


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_text_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str | dict) for v in value)


#: declared type -> (check, what the caller must send)
_KINDS: Mapping[str, tuple[Any, str]] = {
    "text": (lambda v: isinstance(v, str), "a string"),
    "label": (lambda v: isinstance(v, str), "a string"),
    "documents": (_is_text_list, "a list of strings"),
    "vector": (lambda v: isinstance(v, list) and all(map(_is_number, v)), "a list of numbers"),
    "scores": (lambda v: isinstance(v, list) and all(map(_is_number, v)), "a list of numbers"),
    "indices": (
        lambda v: (
            isinstance(v, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in v)
        ),
        "a list of integers",
    ),
}


def _size_problem(value: Any, limits: InputLimits) -> str | None:
    if isinstance(value, str) and len(value) > limits.max_text_chars:
        return f"text of {len(value)} characters (the limit is {limits.max_text_chars})"
    if isinstance(value, list):
        if len(value) > limits.max_list_items:
            return f"list of {len(value)} items (the limit is {limits.max_list_items})"
        for item in value:
            if isinstance(item, str) and len(item) > limits.max_text_chars:
                return f"an item of {len(item)} characters (the limit is {limits.max_text_chars})"
    return None


def _value_problem(kind: str, value: Any, limits: InputLimits) -> str | None:
    check = _KINDS.get(kind)
    if check is not None and not check[0](value):
        return f"must be {check[1]} (declared type {kind!r}), got {type(value).__name__}"
    return _size_problem(value, limits)


def input_problems(
    declared: Mapping[str, str], given: Mapping[str, Any], limits: InputLimits
) -> list[tuple[str, str]]:
    """Every problem of ``given`` against ``declared`` as ``(field, message)``; empty: valid.
    Fields are named ``inputs.<name>``. A workflow declaring no inputs accepts any payload
    (older specs wire ``input.*`` edges without declaring them)."""
    if not declared:
        return []
    problems: list[tuple[str, str]] = []
    for name, raw_kind in declared.items():
        kind = raw_kind.rstrip("?")
        if name not in given or given[name] is None:
            if not raw_kind.endswith("?"):
                problems.append((f"inputs.{name}", f"required input ({kind}) is missing"))
            continue
        problem = _value_problem(kind, given[name], limits)
        if problem is not None:
            problems.append((f"inputs.{name}", problem))
    for name in given:
        if name not in declared:
            known = ", ".join(sorted(declared))
            problems.append((f"inputs.{name}", f"unknown input (this workflow takes: {known})"))
    return problems


def check_inputs(
    declared: Mapping[str, str], given: Mapping[str, Any], limits: InputLimits | None = None
) -> None:
    """Raise ``ValidationError`` naming the first bad field (nothing has been written);
    ``limits`` default to the settings' (:func:`configured`)."""
    problems = input_problems(declared, given, limits or configured())
    if problems:
        field, message = problems[0]
        shown = given.get(field.removeprefix("inputs."))
        value = shown if not isinstance(shown, str | list) else f"<{type(shown).__name__}>"
        raise ValidationError(field, value, message)
