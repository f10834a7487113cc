"""``jsonable``: outputs become JSON values, whatever shape they arrive in. ``small``: the
per-node view keeps outputs whose JSON is short and summarises the others; vectors are decided
from their length where that is enough, exactly as encoding them would."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from control.services.run_results import MAX_NODE_OUTPUT_CHARS, jsonable, small


class _Tensorish:
    def tolist(self) -> list[float]:
        return [1.5, 2.5]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ([0.25, -1.0, 3], [0.25, -1.0, 3]),  # a vector of plain numbers
        ((1, "a", None, True), [1, "a", None, True]),  # a tuple becomes a list
        ([[0.5, 1.0], [2.0]], [[0.5, 1.0], [2.0]]),  # nested vectors
        ({1: [_Tensorish()]}, {"1": [[1.5, 2.5]]}),  # keys as text, tensors as lists
        ([np.array([1, 2]), 0.5], [[1, 2], 0.5]),  # arrays inside a list
        ([object.__new__(type("Odd", (), {"__str__": lambda s: "odd"}))], ["odd"]),
    ],
)
def test_outputs_become_json_values(value, expected) -> None:
    out = jsonable(value)
    assert out == expected
    json.dumps(out)  # every part is a JSON value


def test_a_vector_is_copied_not_shared() -> None:
    vector = [0.5, 1.5]
    out = jsonable(vector)
    assert out == vector and out is not vector


def _by_encoding(value):
    """``small`` as it was written first: encode, then decide."""
    text = json.dumps(value, default=str)
    if len(text) <= MAX_NODE_OUTPUT_CHARS:
        return value
    if isinstance(value, list):
        return {"summary": f"list of {len(value)} items", "head": value[:8]}
    if isinstance(value, str):
        return {"summary": f"text of {len(value)} characters", "head": value[:400]}
    return {"summary": f"{type(value).__name__} of {len(text)} JSON characters"}


_WIDE = -2.2250738585072014e-308  # the longest float text


@pytest.mark.parametrize(
    "value",
    [
        [],
        [0.1] * 32,
        [_WIDE] * 76,  # the most floats certainly short: 26 characters each at most
        [_WIDE] * 77,  # past that bound: encoded to decide (it is long)
        [0.5] * 77,  # the same count, short
        [1.0] * 666,  # 3 characters each at least, and 666 fit
        [1.0] * 667,  # cannot fit
        [True, None, math.nan, -math.inf, 1e300],
        [1] * 100,  # ints are not bounded by the float rule: encoded
        [10**700] * 3,
        ["a"] * 50,
        [[0.1, 0.2]] * 10,
        "x" * 2001,
        "short",
        {"k": [0.1] * 300},
        7,
    ],
)
def test_small_decides_as_the_encoding_would(value):
    assert small(value) == _by_encoding(value)  # (a list compares its NaN by identity)
