"""Prometheus metrics of the live runtime, in a registry of their own (the API serves it at
``/metrics`` with ``prometheus_client.generate_latest(metrics.registry)``).

Updated from the driver's thread only: batch completions and tokens as they happen, queue depth,
device utilisation and preload figures from a periodic ``sample`` of the core's gauges.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64)


class Children:
    """The children of one labelled metric by their label texts, each looked up once.

    ``prometheus_client``'s ``labels()`` checks and converts every value and takes the
    metric's lock on every call; the serving path made about a dozen such calls per request,
    always for the same few label sets. A child, once made, belongs to its metric for good
    (nothing of ours calls ``remove``/``clear``), so keeping it is exact. ``labels(*texts)``
    takes the values as ``str`` (the texts Prometheus shows: pass ``str(x)`` for others, so
    that 1 and True cannot share an entry). Safe from any thread: a race only looks a child
    up twice, and ``labels()`` returns the same one both times.
    """

    __slots__ = ("_metric", "_by_texts")

    def __init__(self, metric: Any) -> None:
        self._metric = metric
        self._by_texts: dict[tuple[str, ...], Any] = {}

    def labels(self, *texts: str) -> Any:
        """The child of these label texts (made on first use), as ``metric.labels(*texts)``."""
        child = self._by_texts.get(texts)
        if child is None:
            child = self._by_texts[texts] = self._metric.labels(*texts)
        return child


class RuntimeMetrics:
    """The runtime's metrics. One instance per runtime; tests read them back from ``registry``."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.queue_depth = Gauge(
            "legato_queue_depth", "Steps queued per model (unplaced: no replica yet)",
            ["model"], registry=r,
        )  # fmt: skip
        self.runs_in_flight = Gauge("legato_runs_in_flight", "Runs admitted, not ended", registry=r)
        self.batch_size = Histogram(
            "legato_batch_size", "Items per dispatched batch", ["model"],
            buckets=_BATCH_BUCKETS, registry=r,
        )  # fmt: skip
        self.step_latency = Histogram(
            "legato_batch_latency_seconds", "Dispatch to completion of a batch", ["model"],
            buckets=_LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.run_latency = Histogram(
            "legato_run_latency_seconds", "Submit to end of a run", ["workflow", "status"],
            buckets=_LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.ttft = Histogram(
            "legato_time_to_first_token_seconds", "Submit to first streamed token", ["workflow"],
            buckets=_LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.tokens_total = Counter(
            "legato_tokens", "Tokens processed (real tokenizer counts)", ["model", "direction"],
            registry=r,
        )  # fmt: skip
        self.device_busy = Counter(
            "legato_device_busy_seconds", "Measured compute time per device", ["device"],
            registry=r,
        )  # fmt: skip
        self.device_util = Gauge(
            "legato_device_utilization_ratio", "Busy share of the last sampling interval",
            ["device"], registry=r,
        )  # fmt: skip
        self.preload = Gauge(
            "legato_preload", "Speculative preloads: issued, hits, misses", ["outcome"], registry=r
        )
        self._executor_counters(r)
        self._generate_figures(r)
        self._scaling_gauges(r)
        self._busy_since_sample: dict[str, float] = {}
        self._last_sample: float | None = None
        self._resolve_children_once()

    def _generate_figures(self, r: CollectorRegistry) -> None:
        """Prefix cache and first token of generate steps, per model: the prefix hit rate is
        ``legato_prefix_cache_hit_tokens`` over ``legato_tokens{direction="input"}``."""
        self.step_ttft = Histogram(
            "legato_generate_time_to_first_token_seconds",
            "Run submission to a generate step's first token (streamed or not)", ["model"],
            buckets=_LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.prefix_hit_tokens = Counter(
            "legato_prefix_cache_hit_tokens", "Prompt tokens served from a reused KV prefix",
            ["model"], registry=r,
        )  # fmt: skip

    def _scaling_gauges(self, r: CollectorRegistry) -> None:
        self.preload_hit_rate = Gauge(
            "legato_preload_hit_rate", "Speculative preloads used before their eviction, over "
            "the preloads issued (0 before any)", registry=r,
        )  # fmt: skip
        self.scale_events = Gauge(
            "legato_scale_events", "Autoscaling events so far: scale_out (a replica added), "
            "scale_in (one drained), drained (evicted once empty), no_room", ["event"], registry=r,
        )  # fmt: skip

    def _executor_counters(self, r: CollectorRegistry) -> None:
        self.workers_down = Counter(
            "legato_worker_down", "Worker crashes or hangs detected", ["device"], registry=r
        )
        self.moved_bytes = Counter(
            "legato_moved_bytes", "Bytes of step inputs moved here from another worker "
            "(shared memory, or Ray's object store across actors and nodes)", ["model"],
            registry=r,
        )  # fmt: skip
        self.preemptions = Counter(
            "legato_preemptions", "Steps taken back from borrowed headroom and requeued, by "
            "the priority class and tenant of the preempted work", ["priority_class", "tenant"],
            registry=r,
        )  # fmt: skip
        self.breaker_changes = Counter(
            "legato_breaker_changes", "Replica circuit breakers that changed state", ["state"],
            registry=r,
        )  # fmt: skip

    def _resolve_children_once(self) -> None:
        """The per-batch and per-run updates resolve their labelled children once (see
        ``Children``): they run for every batch and every run, on the driver's loop."""
        self._batch_size = Children(self.batch_size)
        self._step_latency = Children(self.step_latency)
        self._device_busy = Children(self.device_busy)
        self._tokens = Children(self.tokens_total)
        self._run_latency = Children(self.run_latency)

    def batch_done(
        self, model: str, device: str, size: int, device_ms: float, wall_s: float,
        moved_bytes: int = 0,
    ) -> None:  # fmt: skip
        if moved_bytes:
            self.moved_bytes.labels(model).inc(moved_bytes)
        self._batch_size.labels(model).observe(size)
        self._step_latency.labels(model).observe(wall_s)
        self._device_busy.labels(device).inc(device_ms / 1000.0)
        self._busy_since_sample[device] = self._busy_since_sample.get(device, 0.0) + device_ms

    def tokens(self, model: str, tokens_in: int, tokens_out: int, prefix_hit: int) -> None:
        self._tokens.labels(model, "input").inc(tokens_in)
        self._tokens.labels(model, "output").inc(tokens_out)
        if prefix_hit:
            self.prefix_hit_tokens.labels(model).inc(prefix_hit)

    def run_done(self, workflow: str, status: str, wall_s: float) -> None:
        self._run_latency.labels(workflow, status).observe(wall_s)

    def first_token(self, workflow: str, wall_s: float) -> None:
        self.ttft.labels(workflow).observe(wall_s)

    def step_first_token(self, model: str, wall_s: float) -> None:
        self.step_ttft.labels(model).observe(wall_s)

    def breaker(self, state: str) -> None:
        self.breaker_changes.labels(state).inc()

    def preempted(self, priority_class: str, tenant: str) -> None:
        self.preemptions.labels(priority_class, tenant).inc()

    def worker_down(self, device: str) -> None:
        self.workers_down.labels(device).inc()

    def sample(self, gauges, now: float) -> None:  # noqa: ANN001 - the core's CoreGauges
        """Gauges from the core's sampled figures; utilisation over the time since the last
        sample. Cheap at any backlog: ``ControlCore.gauges`` builds no snapshot."""
        for model, n in gauges.queue_depth.items():
            self.queue_depth.labels(model).set(n)
        self.runs_in_flight.set(gauges.runs_in_flight)
        self.preload.labels("issued").set(gauges.preload.issued)
        self.preload.labels("hits").set(gauges.preload.hits)
        self.preload.labels("misses").set(gauges.preload.misses)
        issued = gauges.preload.issued
        self.preload_hit_rate.set(gauges.preload.hits / issued if issued else 0.0)
        for event, n in gauges.scale_events.items():
            self.scale_events.labels(event).set(n)
        if self._last_sample is not None and now > self._last_sample:
            span_ms = (now - self._last_sample) * 1000.0
            for device_id in gauges.device_ids:
                busy = self._busy_since_sample.get(device_id, 0.0)
                self.device_util.labels(device_id).set(min(1.0, busy / span_ms))
        self._busy_since_sample.clear()
        self._last_sample = now
