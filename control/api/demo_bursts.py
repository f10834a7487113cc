"""Demo bursts: bounded floods of one tenant's runs, started by the admin to show fair share
under contention (``/admin/demo/bursts``, off unless ``LEGATO_DEMO_BURSTS`` is on).

A burst is an asyncio task on the gateway's loop that submits the tenant's workflow runs at a
fixed rate, each through :func:`~control.api.running.start_run` as that tenant (async mode), so
the gateway's door, the core's admission, quotas and fair share and the usage ledger treat them
exactly as the tenant's own calls. It ends after ``duration_s`` or ``max_requests`` submissions,
or when stopped; it keeps counts (sent, accepted, refused with the last refusal's reason) and
the ids of its latest runs. The gateway keeps the last :data:`KEPT` bursts.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from control.api.auth import Principal
from control.api.errors import ApiError
from control.api.running import body_hash, start_run
from control.api.state import Gateway
from control.clock import monotonic, wall_time

log = logging.getLogger(__name__)

#: Finished bursts kept for ``GET /admin/demo/bursts`` (the oldest are forgotten first).
KEPT = 50
#: Ids of the latest runs a burst remembers.
RUN_IDS_KEPT = 20
EXTRA = "demo_bursts"


@dataclass(frozen=True)
class BurstLimits:
    """The caps a burst must stay within (``LEGATO_DEMO_BURST_MAX_*``)."""

    max_rate_per_s: float
    max_duration_s: float
    max_requests: int


@dataclass
class Burst:
    """One burst's bounds and progress; ``state``: running, finished, stopped or failed."""

    id: str
    tenant: str
    tenant_id: int
    workflow: str
    rate_per_s: float
    duration_s: float
    max_requests: int
    started_by: str
    started_at: float
    state: str = "running"
    sent: int = 0
    accepted: int = 0
    refused: int = 0
    last_refusal: str | None = None
    ended_at: float | None = None
    run_ids: deque[str] = field(default_factory=lambda: deque(maxlen=RUN_IDS_KEPT))

    def view(self) -> dict[str, Any]:
        """The burst as the API shows it (JSON values)."""
        out = {k: v for k, v in vars(self).items() if k != "run_ids"}
        out["ends_by"] = self.started_at + self.duration_s
        out["recent_run_ids"] = list(self.run_ids)
        return out


class DemoBursts:
    """The gateway's bursts: start (with the caller's checked bounds), list, stop."""

    def __init__(self, gw: Gateway, limits: BurstLimits) -> None:
        self.gw, self.limits = gw, limits
        self._bursts: dict[str, Burst] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._ids = itertools.count(1)

    def start(self, burst: Burst, payload: Mapping[str, Any], max_output_tokens: int) -> Burst:
        """Record ``burst`` and start submitting on the running loop (bounds checked by the
        caller against :attr:`limits`)."""
        self._bursts[burst.id] = burst
        self._tasks[burst.id] = asyncio.get_running_loop().create_task(
            self._drive(burst, payload, max_output_tokens))  # fmt: skip
        self._forget_old()
        return burst

    def new_id(self) -> str:
        return f"burst-{next(self._ids)}"

    def list(self) -> list[Burst]:
        """Every kept burst, newest first."""
        return sorted(self._bursts.values(), key=lambda b: b.started_at, reverse=True)

    def get(self, burst_id: str) -> Burst:
        """The burst; 404 naming an unknown id."""
        if burst_id not in self._bursts:
            raise ApiError(404, "not_found", f"no demo burst {burst_id!r}")
        return self._bursts[burst_id]

    async def stop(self, burst_id: str) -> Burst:
        """Stop a running burst (its runs already submitted go on); an ended one is returned
        as it is."""
        burst = self.get(burst_id)
        task = self._tasks.pop(burst_id, None)
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
            burst.state, burst.ended_at = "stopped", wall_time()
        return burst

    async def stop_all(self) -> None:
        for burst_id in list(self._tasks):
            await self.stop(burst_id)

    def _forget_old(self) -> None:
        ended = [b for b in self.list() if b.state != "running"]
        for burst in ended[KEPT:]:
            self._bursts.pop(burst.id, None)
            self._tasks.pop(burst.id, None)

    async def _drive(self, burst: Burst, payload: Mapping[str, Any], max_tokens: int) -> None:
        """Submit at ``rate_per_s`` until the duration or the request cap is reached."""
        total = min(burst.max_requests, math.ceil(burst.rate_per_s * burst.duration_s))
        who = Principal(kind="tenant", actor=f"{burst.started_by}/{burst.id}",
                        tenant_id=burst.tenant_id, tenant_name=burst.tenant)  # fmt: skip
        name, _, version = burst.workflow.partition(":")
        t0 = monotonic()
        try:
            for i in range(total):
                wait = t0 + i / burst.rate_per_s - monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                if monotonic() - t0 > burst.duration_s:
                    break
                await self._send(burst, who, (name, version), payload, max_tokens, i)
            burst.state = "finished"
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a control loop logs, marks the item failed and goes on
            log.exception("demo burst %s failed", burst.id)
            burst.state, burst.last_refusal = "failed", str(exc)
        finally:
            if burst.ended_at is None and burst.state != "running":
                burst.ended_at = wall_time()

    async def _send(self, burst: Burst, who: Principal, workflow: tuple[str, str],
                    payload: Mapping[str, Any], max_tokens: int, i: int) -> None:  # fmt: skip
        """One run as the tenant, counted accepted or refused (with the refusal's reason)."""
        burst.sent += 1
        digest = body_hash(f"demo-burst:{burst.id}:{i}", dict(payload))
        try:
            started = await start_run(self.gw, who, workflow, payload, digest, None,
                                      max_output_tokens=max_tokens)  # fmt: skip
        except ApiError as err:
            burst.refused += 1
            burst.last_refusal = f"{err.status}: {err.body.detail}"
            return
        except Exception as exc:  # e.g. a validation error: counted, the burst goes on
            burst.refused += 1
            burst.last_refusal = str(exc)
            return
        burst.accepted += 1
        burst.run_ids.append(started.request.id)


def default_inputs(spec: Mapping[str, Any], label: str) -> dict[str, Any] | None:
    """Inputs for every text input of a workflow spec (``label`` as the text); None when the
    workflow has an input of another type (the caller must give ``inputs``)."""
    out: dict[str, Any] = {}
    for name, kind in (spec.get("inputs") or {}).items():
        if kind != "text":
            return None
        out[name] = label
    return out
