"""JSON columns go through db.json_codec: orjson, with the standard library where it refuses."""

from __future__ import annotations

import json
import math

import pytest
from sqlalchemy import select, text

from db import json_codec
from db.models import Node
from db.session import make_session_factory, session_scope


@pytest.mark.parametrize(
    "value",
    [
        {"embedding": [0.1, -2.5e-7, 3.0], "usage": {"input_tokens": 7}},
        ["ü", "日本", {"nested": [None, True, False]}],
        {"big": 2**70},  # beyond 64 bits: orjson refuses, the fallback writes it
    ],
)
def test_dumps_then_loads_returns_the_value(value) -> None:
    assert json_codec.loads(json_codec.dumps(value)) == value
    assert json.loads(json_codec.dumps(value)) == value  # plain JSON for any reader


def test_integer_keys_become_strings_like_the_standard_encoder() -> None:
    assert json_codec.loads(json_codec.dumps({1: "a"})) == json.loads(json.dumps({1: "a"}))


def test_nan_is_stored_as_null_not_as_an_invalid_token() -> None:
    assert json_codec.loads(json_codec.dumps({"x": math.nan})) == {"x": None}


def test_values_no_encoder_handles_raise_type_error() -> None:
    with pytest.raises(TypeError):
        json_codec.dumps({"x": object()})


def test_engine_json_columns_are_written_by_the_codec(engine) -> None:
    factory = make_session_factory(engine)
    labels = {"text": "naïve", "scores": [0.5, 1.25]}
    with session_scope(factory) as session:
        session.add(Node(name="codec", labels=labels))
    with factory() as session:
        stored = session.execute(text("SELECT labels FROM nodes WHERE name = 'codec'")).scalar()
        assert session.scalar(select(Node.labels).where(Node.name == "codec")) == labels
    if isinstance(stored, str):  # SQLite keeps the text as written: compact, UTF-8 kept
        assert stored == json_codec.dumps(labels)
        assert "naïve" in stored and ": " not in stored
