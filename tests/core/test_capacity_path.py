"""The door's decision on the gateway's own path (control.core.capacity.path_refusal) and the
door that measures the path (control.api.door.Door)."""

from __future__ import annotations

import pytest

from control.api.door import Door
from control.core.capacity import CapacityAdmissionConfig, path_refusal

ON = CapacityAdmissionConfig(lower_class_path_s=0.02)


@pytest.mark.parametrize(
    ("config", "in_flight", "per_s", "cls", "left", "refused"),
    [
        (ON, 0, 0.01, "batch", 1.0, False),  # nothing on the path
        (ON, 5, 0.0, "batch", 1.0, False),  # nothing measured yet
        (ON, 2, 0.01, "batch", 1.0, False),  # 0.02 s: within the lower classes' headroom
        (ON, 3, 0.01, "batch", 1.0, True),  # 0.03 s: past it, refused
        (ON, 3, 0.01, "critical", 1.0, False),  # the most urgent class keeps the headroom
        (ON, 200, 0.01, "critical", 1.0, True),  # 2 s on the path: past its 1 s, refused
        (CapacityAdmissionConfig(margin=2.0), 60, 0.01, "critical", 1.0, True),  # 0.6 s x 2
        (CapacityAdmissionConfig(enabled=False), 200, 0.01, "batch", 1.0, False),  # off
    ],
)
def test_path_refusal(config, in_flight, per_s, cls, left, refused):
    refusal = path_refusal(config, in_flight, per_s, cls, left)
    assert (refusal is not None) is refused
    if refusal is not None:
        assert refusal.retry_after_s == pytest.approx(in_flight * per_s)
        assert "over capacity" in refusal.reason and cls in refusal.reason


class Ticks:
    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


def test_door_measures_the_pace_of_answers_and_refuses_lower_classes_first():
    clock = Ticks()
    door = Door(ON, clock)  # type: ignore[arg-type]
    for i in range(10):
        door.hold(f"r{i}")
    for i in range(10):  # one answer every 10 ms while busy
        clock.now += 0.01
        door.leave(f"r{i}")
    assert door.in_flight == 0
    assert 0.0 < door.per_request_s <= 0.01
    door.per_request_s = 0.01
    for i in range(3):
        door.hold(f"s{i}")
    assert door.check("batch", 1.0) is not None  # 3 x 10 ms > 20 ms headroom
    assert door.check("critical", 1.0) is None
    door.leave("s0")
    door.leave("s0")  # a second leave of the same run changes nothing
    assert door.in_flight == 2
    assert door.check("batch", 1.0) is None
    assert door.refused == 1
