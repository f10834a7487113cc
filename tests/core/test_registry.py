"""One registry shape for every policy family: names, config checks, errors that name the value."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from control.core.batching.registry import BATCHING
from control.core.placement.plan import PlanError
from control.core.placement.registry import PLACEMENT
from control.core.registry import PolicyEntry, PolicyRegistry
from control.core.routing.registry import ROUTING
from control.core.tenancy.fairshare.registry import FAIR_SHARE_POLICIES


@dataclass(frozen=True)
class SlowConfig:
    factor: int = 2


@dataclass(frozen=True)
class FastConfig:
    pass


class Slow:
    def __init__(self, config: SlowConfig) -> None:
        self.config = config


def _family() -> PolicyRegistry[Slow]:
    return PolicyRegistry("toy strategy", (PolicyEntry("slow", SlowConfig, Slow, "slowly"),))


def test_build_uses_the_config_given_or_the_default() -> None:
    family = _family()
    assert family.build("slow").config == SlowConfig()
    assert family.build("slow", SlowConfig(5)).config.factor == 5
    assert "slow" in family and list(family) == ["slow"] and len(family) == 1


def test_misuse_names_the_bad_value() -> None:
    family = _family()
    with pytest.raises(ValueError, match=r"unknown toy strategy 'quick'; known: \['slow'\]"):
        family.build("quick")
    with pytest.raises(TypeError, match="'slow' needs a SlowConfig, got FastConfig"):
        family.build("slow", FastConfig())
    with pytest.raises(ValueError, match="registered twice"):
        family.register(PolicyEntry("slow", SlowConfig, Slow, "again"))


def test_a_family_keeps_the_errors_its_callers_catch() -> None:
    with pytest.raises(PlanError, match="warp"):
        PLACEMENT.build("warp")
    with pytest.raises(PlanError, match="PlannerConfig"):
        PLACEMENT.config_for("planner", SlowConfig())


@pytest.mark.parametrize("family", [BATCHING, ROUTING, FAIR_SHARE_POLICIES, PLACEMENT])
def test_every_family_is_one_registry_of_documented_strategies(family) -> None:  # noqa: ANN001
    assert isinstance(family, PolicyRegistry) and len(family) >= 1
    for name in family:
        entry = family.entry(name)
        assert entry.name == name and entry.help
        assert isinstance(family.config_for(name), entry.config_type)
