"""Per-variant canary figures on ``/metrics``, read from the running core's snapshot.

For each model with a canary (running or ended), per variant (``variant`` = ``baseline`` or
``canary``, ``version`` = its name:version): ``legato_canary_requests_total`` (steps finished on
it since the canary started), ``legato_canary_errors_total`` (of which failed),
``legato_canary_latency_p99_seconds`` (recent steps, dispatch to completion), and per model
``legato_canary_fraction`` (share of runs the canary takes now: 0 after a rollback) and
``legato_canary_rolled_back`` (1 when the core rolled it back).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from control.core.canary_stats import PPM


class CanaryCollector:
    """A collector over ``canaries()`` (baseline key -> ``CanaryView``), read at each scrape."""

    def __init__(self, canaries: Callable[[], Mapping[str, Any]]) -> None:
        self._canaries = canaries

    def collect(self) -> Iterator[Metric]:
        labels = ["model", "variant", "version"]
        requests = CounterMetricFamily("legato_canary_requests", "Steps finished per canary "
                                       "variant since the canary started.", labels=labels)  # fmt: skip
        errors = CounterMetricFamily("legato_canary_errors", "Failed steps per canary variant.",
                                     labels=labels)  # fmt: skip
        p99 = GaugeMetricFamily("legato_canary_latency_p99_seconds", "p99 step latency of the "
                                "recent steps per canary variant.", labels=labels)  # fmt: skip
        fraction = GaugeMetricFamily("legato_canary_fraction", "Share of runs the canary takes.",
                                     labels=["model", "version"])  # fmt: skip
        rolled = GaugeMetricFamily("legato_canary_rolled_back", "1 when the core rolled the "
                                   "canary back.", labels=["model", "version"])  # fmt: skip
        for key, c in sorted(self._canaries().items()):
            for variant, v in (("baseline", c.baseline), ("canary", c.canary)):
                names = [key, variant, v.model_key]
                requests.add_metric(names, v.requests)
                errors.add_metric(names, v.errors)
                if v.p99_s is not None:
                    p99.add_metric(names, v.p99_s)
            fraction.add_metric([key, c.canary_key], c.fraction_ppm / PPM)
            rolled.add_metric([key, c.canary_key], 1.0 if c.state == "rolled_back" else 0.0)
        yield from (requests, errors, p99, fraction, rolled)


def canary_registry(runtime: Any) -> CollectorRegistry:
    """A registry holding the collector over ``runtime``'s core snapshot (nothing before the
    runtime has started)."""
    registry = CollectorRegistry()
    started = lambda: getattr(runtime, "driver", None) is not None  # noqa: E731
    registry.register(CanaryCollector(lambda: runtime.snapshot().canaries if started() else {}))
    return registry
