"""Canary traffic splits: one model version takes a fraction of its baseline's traffic, is
judged against it step by step, and is rolled back automatically when it does worse.

A canary (``CanaryChanged``) sends ``fraction_ppm`` (parts per million) of the runs whose nodes
name the baseline model key to the canary key (another version of the model), once a replica
of it is loaded (it is loaded as the canary starts; until then the baseline serves them all).
The variant of a run is a stable hash of its request id
(:func:`~control.core.lifecycle.pick_canary`), so every node and retry of a run, and a
client's retry under the same id, use one version. A step that fails on the canary is retried
on the baseline (:func:`on_result`: a loss, not one of the node's retries) and its run stays
off the canary, so a failing canary costs latency, never a request.

Every finished step of either variant is observed (ok or not, dispatch-to-completion latency;
the baseline's judged window holds only its control cohort, see
:mod:`control.core.canary_stats`); the ``placement`` phase judges each running canary
(:func:`judge`, :func:`~control.core.canary_stats.verdict`): a canary worse than the baseline
by more than the configured margins, or one whose replica failed to load or opened its
breaker, is rolled back: its fraction goes to 0, its waiting steps are routed again (to the
baseline) and its replicas drain (no new work, evicted once idle). Each change is a
``CanaryTransition`` carrying its reason and figures.
"""

from __future__ import annotations

from control.core.actions import CanaryTransition, DrainReplica
from control.core.canary_stats import (
    ENDED,
    PPM,
    ROLLED_BACK,
    RUNNING,
    CanaryConfig,
    CanaryView,
    VariantStats,
    VariantView,
    hash_point,
    in_control,
    verdict,
)
from control.core.cluster import Cluster
from control.core.context import Policies
from control.core.errors import InvalidCanaryError, UnknownModelError
from control.core.events import CanaryChanged
from control.core.loads import evict, start_load
from control.core.parts import ActionLog, Catalog, Ids, Queues
from control.core.queueing import dequeue
from control.core.state import QueuedStep, ReplicaRecord


class Canary:
    """One model's canary (kept in ``Catalog.canaries`` under the baseline key, also after it
    ended, for the snapshot). ``draining``: its replicas waiting to go idle to be evicted."""

    __slots__ = ("model_key", "canary_key", "fraction_ppm", "state", "reason", "changed_at",
                 "baseline", "canary", "draining", "broken", "fresh")  # fmt: skip

    def __init__(self, ev: CanaryChanged, window: int, now: float) -> None:
        self.model_key, self.canary_key = ev.model_key, ev.canary_key
        self.fraction_ppm, self.state, self.reason = ev.fraction_ppm, RUNNING, ev.reason
        self.changed_at = now
        self.baseline = VariantStats(ev.model_key, window)
        self.canary = VariantStats(ev.canary_key, window)
        self.draining: set[str] = set()
        self.broken: str | None = None  # why it cannot serve (failed load, open breaker)
        self.fresh = False  # outcomes observed since the last verdict

    def figures(self) -> tuple[tuple[str, float], ...]:
        """The verdict's inputs, for the audit trail."""
        out: list[tuple[str, float]] = []
        for name, s in (("baseline", self.baseline), ("canary", self.canary)):
            out += [(f"{name}_error_rate", s.error_rate()), (f"{name}_samples", len(s.recent))]
            p99 = s.p99_s()
            if p99 is not None:
                out.append((f"{name}_p99_s", p99))
        return tuple(out)

    def view(self) -> CanaryView:
        """The immutable view the snapshot carries."""
        return CanaryView(self.model_key, self.canary_key, self.fraction_ppm, self.state,
                          self.reason, self.changed_at, VariantView.of(self.baseline),
                          VariantView.of(self.canary), tuple(sorted(self.draining)))  # fmt: skip


def check(catalog: Catalog, ev: CanaryChanged) -> None:
    """Raise naming the first bad part of ``ev`` (misuse: nothing changes)."""
    for key in (ev.model_key, ev.canary_key):
        if key not in catalog.models:
            raise UnknownModelError(key)
    if ev.canary_key == ev.model_key:
        raise InvalidCanaryError("canary_key", ev.canary_key, "must differ from the baseline")
    if not 0 <= ev.fraction_ppm <= PPM:
        raise InvalidCanaryError("fraction_ppm", ev.fraction_ppm, f"must be in [0, {PPM}]")
    for base, c in catalog.canaries.items():
        if base != ev.model_key and c.state == RUNNING and ev.canary_key == c.canary_key:
            raise InvalidCanaryError("canary_key", ev.canary_key, f"is the canary of {base}")


def change(
    pol: Policies, catalog: Catalog, cluster: Cluster, queues: Queues, ids: Ids,
    log: ActionLog, ev: CanaryChanged, now: float,
) -> None:  # fmt: skip
    """Apply a checked ``CanaryChanged``: start (or re-weigh) the canary, or end it (0)."""
    cur = catalog.canaries.get(ev.model_key)
    was = cur.state if cur is not None else ""
    if ev.fraction_ppm == 0:
        if cur is not None and cur.state == RUNNING:
            _withdraw(pol, cluster, queues, log, cur, ENDED, ev.reason, now)
        return
    if cur is not None and cur.state == RUNNING and cur.canary_key == ev.canary_key:
        cur.fraction_ppm, cur.reason = ev.fraction_ppm, ev.reason  # same canary: keep its figures
    else:
        if cur is not None and cur.state == RUNNING:
            _withdraw(pol, cluster, queues, log, cur, ENDED, f"replaced: {ev.reason}", now)
            was = ENDED
        cur = catalog.canaries[ev.model_key] = Canary(ev, pol.config.canary.window, now)
    if not cluster.by_model.get(ev.canary_key):  # load it now rather than on its first run
        why = f"canary {ev.canary_key} of {ev.model_key} has no replica"
        start_load(pol, cluster, ids, log, catalog.models[ev.canary_key], why, now, fallback=True)
    log.emit(CanaryTransition(ev.model_key, ev.canary_key, was, RUNNING, ev.fraction_ppm,
                              ev.reason))  # fmt: skip


def on_result(catalog: Catalog, step: QueuedStep, ok: bool, now: float) -> bool:
    """Observe a finished step of a model with a canary. True: it failed on the canary, and
    its run goes back to the baseline (the caller retries it there, not as a node retry)."""
    c = catalog.canaries.get(step.node.model or "")
    if c is None:
        return False
    latency = now - step.dispatched_at if step.dispatched_at is not None else 0.0
    if step.model_key == c.canary_key:
        c.canary.observe(ok, latency)
        c.fresh = True
        if not ok:
            step.run.off_canary = True
            return True
    elif step.model_key == c.model_key:
        point = hash_point(step.run.request.request_id)
        c.baseline.observe(ok, latency, in_control(point, c.fraction_ppm))
    else:
        return False
    c.fresh = True
    return False


def on_broken(catalog: Catalog, cluster: Cluster, replica_id: str, why: str) -> None:
    """A replica failed to load, or its breaker opened (batches failed in a row for reasons of
    its own): when it is a running canary's, the canary is rolled back at the next judgement.
    A version that cannot load or keeps failing cannot serve its fraction, and an open breaker
    would starve the verdict of samples (the canary takes no traffic while it is open)."""
    rec = cluster.replicas.get(replica_id)
    for c in catalog.canaries.values():
        if rec is not None and c.state == RUNNING and rec.model.key == c.canary_key:
            c.broken = why


def judge(
    pol: Policies, catalog: Catalog, cluster: Cluster, queues: Queues, log: ActionLog,
    now: float,
) -> None:  # fmt: skip
    """Roll back each running canary worse than its baseline; evict drained canary replicas."""
    cfg: CanaryConfig = pol.config.canary
    for base in sorted(catalog.canaries):
        c = catalog.canaries[base]
        if c.state == RUNNING and (c.fresh or c.broken is not None):
            c.fresh = False
            why = verdict(cfg, c.baseline, c.canary)
            if c.broken is not None:
                why = c.broken
            if why is not None:
                log.counters["canary.rolled_back"] += 1
                _withdraw(pol, cluster, queues, log, c, ROLLED_BACK, f"canary {why}", now)
        for rid in sorted(c.draining):
            rec = cluster.replicas.get(rid)
            if rec is None or (not rec.running and not rec.queue):
                c.draining.discard(rid)
            if rec is not None and not rec.running and not rec.queue:
                evict(cluster, log, rec, f"canary {c.canary_key} drained ({c.state})")


def _withdraw(
    pol: Policies, cluster: Cluster, queues: Queues, log: ActionLog, c: Canary, to: str,
    reason: str, now: float,
) -> None:  # fmt: skip
    """Fraction to 0; the canary's waiting steps are routed again (to the baseline, see
    ``pick_canary``); its replicas drain, the idle ones are evicted at once."""
    log.emit(CanaryTransition(c.model_key, c.canary_key, c.state, to, 0, reason, c.figures()))
    c.state, c.fraction_ppm, c.reason, c.changed_at = to, 0, reason, now
    pending = queues.pending.get(c.canary_key)
    steps = [s for _, _, s in pending.entries.values()] if pending is not None else []
    steps += queues.unplaced.pop(c.canary_key, [])
    replicas = list(cluster.by_model.get(c.canary_key, {}).values())
    for rec in replicas:
        steps += list(rec.queue.values())
    for step in steps:
        if step.replica_id is not None or step.pending_model is not None:
            dequeue(pol, cluster, queues, step, False, now)
        queues.ready.append(step)
    for rec in replicas:
        _drain(cluster, queues, log, c, rec, reason)


def _drain(
    cluster: Cluster, queues: Queues, log: ActionLog, c: Canary, rec: ReplicaRecord, reason: str
) -> None:
    rec.draining, rec.routable = True, False
    queues.unbind_sessions(rec.replica_id)
    devices = tuple(d.device_id for d in rec.devices)
    if not rec.running and not rec.queue:
        evict(cluster, log, rec, f"canary {c.canary_key} {c.state}: {reason}")
        return
    c.draining.add(rec.replica_id)
    log.emit(DrainReplica(rec.replica_id, rec.model.key, devices, f"canary {c.state}: {reason}"))
