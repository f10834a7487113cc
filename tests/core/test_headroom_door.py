"""The door's headroom by class: with ``lower_class_path_s`` set, a call of a class below the
most urgent is refused while a call of the most urgent class is on the gateway's path, even
when the path's predicted delay is within the headroom (the critical call then shares the path
with no lower-class call admitted after it); without the setting, only the delays count."""

from __future__ import annotations

import pytest

from control.api.door import Door
from control.core.capacity import CapacityAdmissionConfig, path_refusal

ON = CapacityAdmissionConfig(lower_class_path_s=0.02)


class Ticks:
    now = 100.0

    def monotonic(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("config", "urgent", "cls", "refused"),
    [
        (ON, 0, "batch", False),  # 10 ms on the path: within the headroom, nothing urgent
        (ON, 1, "batch", True),  # a critical call is on the path: the batch class yields
        (ON, 1, "standard", True),
        (ON, 1, "critical", False),  # the most urgent class never yields to itself
        (CapacityAdmissionConfig(), 1, "batch", False),  # no headroom set: delays only
    ],
)
def test_path_refusal_by_class(config, urgent, cls, refused):
    refusal = path_refusal(config, 1, 0.01, cls, 1.0, urgent)
    assert (refusal is not None) is refused
    if refusal is not None:
        assert "most urgent class" in refusal.reason and refusal.retry_after_s > 0


def test_the_door_refuses_lower_classes_while_a_critical_call_is_held():
    door = Door(ON, Ticks())  # type: ignore[arg-type]
    door.per_request_s = 0.005
    door.hold("std", "standard")
    assert door.check("batch", 1.0) is None  # a standard call held: within the headroom
    door.hold("vip", "critical")
    door.hold("vip", "critical")  # held once
    refusal = door.check("batch", 1.0)
    assert refusal is not None and "1 call(s) of the most urgent class" in refusal.reason
    assert door.check("critical", 1.0) is None
    door.leave("vip")
    assert door.check("batch", 1.0) is None and door.in_flight == 1
