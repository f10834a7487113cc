"""The public GPU profiles predict measurements they were not built from, within stated bounds.

Interpolation: rows built from part of each measured table (as a scenario builds them), the
core's TableLatencyModel predicts the held-out measured points. Rules: the TP, model-family and
GPU derivations predict measured slices they did not use. The bounds are the errors measured
when this was written, with a little room; sim/profiles/README.md reports them per table.
"""

from __future__ import annotations

import pytest

from sim.profiles import heldout

SLICES = [("llama2-70b", gpu, tp) for gpu in ("a100", "h100") for tp in (2, 4, 8)] + [
    ("bloom-176b", gpu, 8) for gpu in ("a100", "h100")
]


@pytest.mark.parametrize(("family", "gpu", "tp"), SLICES)
def test_interpolation_predicts_held_out_llm_points(family: str, gpu: str, tp: int) -> None:
    err = heldout.splitwise_interpolation(family, gpu, tp)
    assert err["prefill"]["n"] == 6 and err["decode"]["n"] == 3
    assert err["prefill"]["mean"] <= 0.10 and err["prefill"]["max"] <= 0.20, err
    assert err["decode"]["mean"] <= 0.10 and err["decode"]["max"] <= 0.25, err


def test_interpolation_predicts_held_out_encoder_points() -> None:
    err = heldout.encoder_interpolation()
    assert err["n"] == len(heldout.HELD_ENCODER)
    assert err["mean"] <= 0.05 and err["max"] <= 0.12, err


@pytest.mark.parametrize("gpu", ["a100", "h100"])
def test_tp_rule_predicts_tp4_from_tp2_and_tp8(gpu: str) -> None:
    err = heldout.tp_rule(gpu)
    assert err["prefill"]["n"] >= 12 and err["decode"]["n"] == 7
    assert err["prefill"]["mean"] <= 0.15 and err["decode"]["mean"] <= 0.22, err


@pytest.mark.parametrize("gpu", ["a100", "h100"])
def test_family_rule_predicts_bloom_from_llama(gpu: str) -> None:
    err = heldout.family_rule(gpu)
    assert err["prefill"]["mean"] <= 0.25 and err["decode"]["mean"] <= 0.25, err


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_gpu_rule_predicts_h100_from_a100(tp: int) -> None:
    err = heldout.gpu_rule(tp)
    assert err["prefill"]["mean"] <= 0.42 and err["decode"]["mean"] <= 0.15, err
