"""RuntimeMetrics.sample reads the core's gauges (no snapshot) into the Prometheus gauges."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from control.core.gauges import CoreGauges, PreloadStats
from control.runtime.metrics import RuntimeMetrics


def _gauges(depth: dict[str, int], runs: int) -> CoreGauges:
    return CoreGauges(MappingProxyType(depth), runs, PreloadStats(3, 2, 1, 666), ("cpu:0", "cpu:1"))


def test_sample_sets_depths_runs_preload_and_utilisation_since_the_last_sample() -> None:
    m = RuntimeMetrics()
    value = m.registry.get_sample_value
    m.sample(_gauges({"embed:1": 4, "unplaced": 0}, 5), now=10.0)
    m.batch_done("embed:1", "cpu:0", 8, device_ms=250.0, wall_s=0.3)
    m.sample(_gauges({"embed:1": 1, "unplaced": 2}, 2), now=11.0)
    assert value("legato_queue_depth", {"model": "embed:1"}) == 1
    assert value("legato_queue_depth", {"model": "unplaced"}) == 2
    assert value("legato_runs_in_flight") == 2
    assert value("legato_preload", {"outcome": "hits"}) == 2
    assert value("legato_device_utilization_ratio", {"device": "cpu:0"}) == pytest.approx(0.25)
    assert value("legato_device_utilization_ratio", {"device": "cpu:1"}) == 0.0


def test_sample_sets_the_preload_hit_rate_and_the_scale_events() -> None:
    m = RuntimeMetrics()
    value = m.registry.get_sample_value
    events = MappingProxyType({"scale_out": 2, "scale_in": 1, "drained": 1, "no_room": 0})
    gauges = CoreGauges(MappingProxyType({}), 0, PreloadStats(4, 3, 1, 750), ("cpu:0",), events)
    m.sample(gauges, now=1.0)
    assert value("legato_preload_hit_rate") == pytest.approx(0.75)  # used / issued
    assert value("legato_scale_events", {"event": "scale_out"}) == 2
    assert value("legato_scale_events", {"event": "drained"}) == 1
