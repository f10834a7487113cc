"""Events a driver records with ``ControlCore.ingest(event, now)``. Recording only: the core
acts on them at the next ``step(now)``."""

from __future__ import annotations

from dataclasses import dataclass

from control.core.context import CoreConfig
from control.core.dag.spec import DagSpec
from control.core.tenancy.base import TenancyConfig
from control.core.types import DeviceSpec, ModelSpec


@dataclass(frozen=True)
class ModelRegistered:
    model: ModelSpec


@dataclass(frozen=True)
class WorkflowRegistered:
    """Register (or replace) a workflow; it is validated at once and refused with every problem."""

    spec: DagSpec


@dataclass(frozen=True)
class DeviceUp:
    device: DeviceSpec


@dataclass(frozen=True)
class DeviceDown:
    device_id: str
    reason: str = "device reported down"


@dataclass(frozen=True)
class ReplicaLoaded:
    """A replica finished loading. For a replica the core did not ask for (initial fleet,
    placement done elsewhere) ``model_key`` and ``device_ids`` describe it."""

    replica_id: str
    model_key: str = ""
    device_ids: tuple[str, ...] = ()
    pool: str = "hot"


@dataclass(frozen=True)
class ReplicaLoadFailed:
    replica_id: str
    error: str


@dataclass(frozen=True)
class ReplicaUnloaded:
    replica_id: str


@dataclass(frozen=True)
class ReplicaBreakerChanged:
    """The executor's circuit breaker of a replica opened (repeated batch failures of the
    replica's own: the model raised, a batch hung) or closed again (its probe succeeded).
    While open the replica takes no new work and its queued steps go elsewhere; after
    ``probe_in_s`` (the executor's cooldown) it takes one batch, the probe, at a time until the
    breaker closes (:mod:`control.core.breakers`). Unknown replicas are ignored."""

    replica_id: str
    open: bool
    probe_in_s: float = 0.0
    reason: str = ""


@dataclass(frozen=True)
class OutputStarted:
    """The first output token of a run's step was produced (borrowed work stops being
    preemptible from here)."""

    request_id: str


@dataclass(frozen=True)
class TenancyConfigChanged:
    config: TenancyConfig


@dataclass(frozen=True)
class PlacementChanged:
    """The desired placement changed (a plan became active): the core converges the fleet to it
    safely at the next steps. ``placements`` are (model key, device ids, replicas, pool): that
    many replicas of the model on that device group. ``splits`` are canary traffic splits,
    (model key workflows name, ((served model key, weight), ...)), applied when the rollout
    completes."""

    plan_id: str
    placements: tuple[tuple[str, tuple[str, ...], int, str], ...]
    splits: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = ()
    reason: str = "plan activated"


@dataclass(frozen=True)
class RollbackRequested:
    """Go back to the placement held before the last rollout, converged the same way."""

    reason: str = "operator asked for a rollback"


@dataclass(frozen=True)
class CanaryChanged:
    """Send ``fraction_ppm`` (parts per million) of the runs whose nodes name ``model_key`` to
    ``canary_key`` instead (another version of the model), judged against the baseline and
    rolled back automatically (:mod:`control.core.canary`); 0 ends the canary."""

    model_key: str
    canary_key: str
    fraction_ppm: int
    reason: str = "operator set a canary"


@dataclass(frozen=True)
class CancelRun:
    """The run's caller (its tenant or an admin) cancels it. Applied at the next step (after
    admission, before finished batches): the run ends ``cancelled`` (``run_stops.cancel``)."""

    request_id: str
    reason: str = "cancelled by its caller"


@dataclass(frozen=True)
class PoliciesChanged:
    """The operator changed the core's policies while it runs (``control.core.policy_change``):
    ``config`` replaces the core's configuration (batching and routing strategies and every
    other knob) and, when ``fair_share`` is set, the tenancy half's fair-share policy is
    replaced by that one (``fair_share_config``: its config, None for its defaults). Applied at
    once and in whole, or refused (ValueError/TypeError naming the value) changing nothing."""

    config: CoreConfig
    fair_share: str | None = None
    fair_share_config: object | None = None


CoreEvent = (
    ModelRegistered
    | WorkflowRegistered
    | DeviceUp
    | DeviceDown
    | ReplicaLoaded
    | ReplicaLoadFailed
    | ReplicaUnloaded
    | ReplicaBreakerChanged
    | OutputStarted
    | TenancyConfigChanged
    | PlacementChanged
    | RollbackRequested
    | CanaryChanged
    | CancelRun
    | PoliciesChanged
)
