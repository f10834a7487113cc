"""Workflow inputs checked against the declared inputs at submission (issue 22, item 2)."""

from __future__ import annotations

import pytest

from control.services.errors import ValidationError
from control.services.run_inputs import InputLimits, check_inputs, input_problems

RAG = {"query": "text"}
LIMITS = InputLimits(max_text_chars=10, max_list_items=3)


def fields(declared, given):  # noqa: ANN001, ANN201
    return [f for f, _ in input_problems(declared, given, LIMITS)]


def test_valid_inputs_pass() -> None:
    assert input_problems(RAG, {"query": "hi"}, LIMITS) == []
    assert input_problems({"q": "text", "docs": "documents?"}, {"q": "x"}, LIMITS) == []
    assert input_problems({"v": "vector"}, {"v": [1, 2.5]}, LIMITS) == []


def test_wrong_type_names_the_field() -> None:
    [(field, message)] = input_problems(RAG, {"query": 5}, LIMITS)
    assert field == "inputs.query" and "string" in message and "int" in message
    assert fields({"d": "documents"}, {"d": "one text"}) == ["inputs.d"]
    assert fields({"v": "vector"}, {"v": [1, True]}) == ["inputs.v"]


def test_missing_and_unknown_fields() -> None:
    assert fields(RAG, {}) == ["inputs.query"]
    assert fields(RAG, {"query": None}) == ["inputs.query"]
    problems = input_problems(RAG, {"query": "x", "qeury": "y"}, LIMITS)
    assert problems[0][0] == "inputs.qeury" and "query" in problems[0][1]


def test_sizes_are_bounded() -> None:
    assert fields(RAG, {"query": "x" * 11}) == ["inputs.query"]
    assert fields({"d": "documents"}, {"d": ["a"] * 4}) == ["inputs.d"]
    assert fields({"d": "documents"}, {"d": ["a" * 11]}) == ["inputs.d"]
    assert fields({"d": "documents"}, {"d": ["a"] * 3}) == []


def test_undeclared_workflow_accepts_any_payload() -> None:
    assert input_problems({}, {"anything": 1}, LIMITS) == []


def test_check_inputs_raises_validation_error() -> None:
    with pytest.raises(ValidationError) as info:
        check_inputs(RAG, {"query": 3})
    assert info.value.field == "inputs.query"
    check_inputs(RAG, {"query": "fine"})
