"""The input size limits of workflow runs are settings: LEGATO_MAX_INPUT_TEXT_CHARS and
LEGATO_MAX_INPUT_LIST_ITEMS change what ``check_inputs`` (the submission check the inference
service runs, with no limits of its own) refuses."""

from __future__ import annotations

import pytest

from control.config import get_settings
from control.services.errors import ValidationError
from control.services.run_inputs import InputLimits, check_inputs, configured

DECLARED = {"query": "text", "documents": "documents?"}


@pytest.fixture
def env(monkeypatch):
    get_settings.cache_clear()
    yield monkeypatch
    get_settings.cache_clear()


def test_defaults_are_200k_characters_and_1000_items(env) -> None:
    env.delenv("LEGATO_MAX_INPUT_TEXT_CHARS", raising=False)
    env.delenv("LEGATO_MAX_INPUT_LIST_ITEMS", raising=False)
    assert configured() == InputLimits(max_text_chars=200_000, max_list_items=1_000)
    check_inputs(DECLARED, {"query": "x" * 200_000, "documents": ["d"] * 1_000})


def test_a_changed_text_limit_is_applied(env) -> None:
    env.setenv("LEGATO_MAX_INPUT_TEXT_CHARS", "8")
    check_inputs(DECLARED, {"query": "x" * 8})
    with pytest.raises(ValidationError) as info:
        check_inputs(DECLARED, {"query": "x" * 9})
    assert info.value.field == "inputs.query" and "the limit is 8" in str(info.value)


def test_a_changed_list_limit_is_applied(env) -> None:
    env.setenv("LEGATO_MAX_INPUT_LIST_ITEMS", "2")
    check_inputs(DECLARED, {"query": "q", "documents": ["a", "b"]})
    with pytest.raises(ValidationError) as info:
        check_inputs(DECLARED, {"query": "q", "documents": ["a", "b", "c"]})
    assert info.value.field == "inputs.documents" and "the limit is 2" in str(info.value)


def test_a_limit_below_one_is_refused(env) -> None:
    env.setenv("LEGATO_MAX_INPUT_LIST_ITEMS", "0")
    with pytest.raises(ValueError, match="max_input_list_items"):
        configured()
