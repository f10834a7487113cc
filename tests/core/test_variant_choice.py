"""The per-request choice among a model's precision variants (``control.core.variant_choice``)."""

from __future__ import annotations

import pytest

from control.core.variant_choice import DEGRADE, PREFERRED, UPGRADE, VariantOption, choose
from control.core.variant_config import VariantChoiceConfig

CFG = VariantChoiceConfig(exact_quality_floor=0.99, balanced_quality_floor=0.95,
                          degrade_wait_us=100_000)  # fmt: skip


def opts(base=(True, 0), bf16=(True, 0, 0.995), int8=(True, 0, 0.93)):
    out = [VariantOption("m:1", "fp32", 1.0, 400, base[0], base[1], is_base=True)]
    if bf16 is not None:
        out.append(VariantOption("m:1@bf16", "bf16", bf16[2], 200, bf16[0], bf16[1]))
    if int8 is not None:
        out.append(VariantOption("m:1@int8", "int8", int8[2], 115, int8[0], int8[1]))
    return out


@pytest.mark.parametrize(
    ("quality", "options", "allow", "ran", "kind"),
    [
        ("exact", opts(), False, "m:1", PREFERRED),
        ("balanced", opts(), False, "m:1@bf16", PREFERRED),  # cheapest >= 0.95: int8 is 0.93
        ("fast", opts(), False, "m:1@int8", PREFERRED),
        # fast's int8 has no replica: upgraded to the nearest more exact one placed
        ("fast", opts(int8=(False, 0, 0.97)), False, "m:1@bf16", UPGRADE),
        # exact's base has no replica: a variant above the floor serves it
        ("exact", opts(base=(False, 0)), False, "m:1@bf16", UPGRADE),
        # saturated base, degrading allowed: bf16 (above the floor), never int8 (below it)
        ("exact", opts(base=(True, 500_000), int8=(True, 0, 0.97)), True, "m:1@bf16", DEGRADE),
        # saturated base, not allowed: it waits on the base
        ("exact", opts(base=(True, 500_000)), False, "m:1", PREFERRED),
        # saturated bf16 under balanced, allowed: int8
        ("balanced", opts(bf16=(True, 500_000, 0.995)), True, "m:1@int8", DEGRADE),
        # not saturated (under the threshold): no degrade even when allowed
        ("balanced", opts(bf16=(True, 90_000, 0.995)), True, "m:1@bf16", PREFERRED),
    ],
)
def test_choice_per_class(quality, options, allow, ran, kind):
    d = choose(CFG, quality, allow, options)
    assert (d.ran, d.kind) == (ran, kind), d.reason
    assert d.quality == quality


def test_exact_never_below_floor_and_says_so():
    # only int8 (0.97) and an unmeasured bf16 are placed: exact waits for the base
    options = opts(base=(False, 0), bf16=(True, 0, None), int8=(True, 0, 0.97))
    d = choose(CFG, "exact", True, options)
    assert d.ran == "m:1" and d.kind == PREFERRED
    assert "floor 0.99" in d.reason and "m:1@int8 0.970" in d.reason
    assert "m:1@bf16 unmeasured" in d.reason


def test_exact_degrade_refused_when_only_cheaper_is_below_floor():
    options = opts(base=(True, 500_000), bf16=None, int8=(True, 0, 0.97))
    d = choose(CFG, "exact", True, options)
    assert d.ran == "m:1" and "no cheaper variant allowed" in d.reason


def test_unmeasured_variant_is_not_balanced_preference():
    options = opts(bf16=(True, 0, None), int8=None)
    assert choose(CFG, "balanced", False, options).ran == "m:1"
    assert choose(CFG, "fast", False, options).ran == "m:1@bf16"


def test_config_refuses_bad_values():
    with pytest.raises(ValueError, match="exact_quality_floor"):
        VariantChoiceConfig(exact_quality_floor=1.5)
    with pytest.raises(ValueError, match="critical_quality"):
        VariantChoiceConfig(critical_quality="perfect")
