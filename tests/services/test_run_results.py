"""``jsonable``: outputs become JSON values, whatever shape they arrive in."""

from __future__ import annotations

import json

import numpy as np
import pytest

from control.services.run_results import jsonable


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
