"""Plan value types: what a placement policy returns.

A :class:`PlacementPlan` lists every placement (model replicas on a device group, in the hot or
cold pool, with the reason it is there), what could not be placed and why, and which constraints
bound the plan (memory on a device, headroom of a reservation, the size of a tensor-parallel
domain, ...). All are frozen; a plan keeps its placements in one canonical order so that two
plans with the same content compare equal.
"""

from __future__ import annotations

from dataclasses import dataclass

from control.core.types import POOLS


class PlanError(ValueError):
    """A plan or one of its parts was built with a bad value; the message names the field."""


def _check(cond: bool, owner: str, name: str, value: object, rule: str) -> None:
    if not cond:
        raise PlanError(f"{owner}.{name}={value!r}: {rule}")


@dataclass(frozen=True)
class Placement:
    """``replicas`` replicas of ``model_key`` on ``device_ids`` (one device, or a tensor-parallel
    group: every device of the group holds the model's ``memory_mib``)."""

    model_key: str
    device_ids: tuple[str, ...]
    replicas: int = 1
    pool: str = "hot"
    reason: str = ""

    def __post_init__(self) -> None:
        _check(bool(self.model_key), "Placement", "model_key", self.model_key, "must not be empty")
        _check(
            bool(self.device_ids), "Placement", "device_ids", self.device_ids, "must not be empty"
        )
        _check(
            len(set(self.device_ids)) == len(self.device_ids),
            "Placement", "device_ids", self.device_ids, "must be distinct",
        )  # fmt: skip
        _check(self.replicas >= 1, "Placement", "replicas", self.replicas, "must be >= 1")
        _check(self.pool in POOLS, "Placement", "pool", self.pool, f"one of {POOLS}")

    @property
    def slot(self) -> tuple[str, tuple[str, ...]]:
        """Identity inside a plan: (model, device group)."""
        return (self.model_key, self.device_ids)


@dataclass(frozen=True)
class Unplaced:
    """``missing`` replicas of ``model_key`` that no device could take, and why."""

    model_key: str
    reason: str
    missing: int = 1

    def __post_init__(self) -> None:
        _check(self.missing >= 1, "Unplaced", "missing", self.missing, "must be >= 1")


#: Kinds of constraint a plan can report as binding.
CONSTRAINT_KINDS: tuple[str, ...] = (
    "memory",  # subject: a device id; the device is too full for a model that wanted it
    "device_size",  # subject: a model; no device is large enough even when empty
    "headroom",  # subject: a reservation id; its reserved share kept a model off its pool
    "precision",  # subject: a model; no up device supports any of its precisions
    "tp_domain",  # subject: a model; no interconnect domain has enough devices with room
    "cold_pool",  # subject: "cold"; devices kept for cold loads would have fit a hot replica
    "spread",  # subject: a model; every device with room already holds one of its replicas
    "max_replicas",  # subject: a model; demand asked for more replicas than the cap
    "pool",  # subject: a pool; it has no up device
)


@dataclass(frozen=True)
class BindingConstraint:
    kind: str
    subject: str
    detail: str

    def __post_init__(self) -> None:
        _check(
            self.kind in CONSTRAINT_KINDS,
            "BindingConstraint",
            "kind",
            self.kind,
            f"one of {CONSTRAINT_KINDS}",
        )


@dataclass(frozen=True)
class PlacementPlan:
    """A complete placement. ``(model_key, device_ids)`` is unique among ``placements``.

    ``cold_devices`` are the devices kept for cold loads; only ``pool="cold"`` placements use
    them. ``policy`` names the strategy that produced the plan ("manual" for hand edits).
    """

    placements: tuple[Placement, ...] = ()
    unplaced: tuple[Unplaced, ...] = ()
    binding_constraints: tuple[BindingConstraint, ...] = ()
    cold_devices: tuple[str, ...] = ()
    policy: str = "manual"

    def __post_init__(self) -> None:
        seen: set[tuple[str, tuple[str, ...]]] = set()
        for p in self.placements:
            _check(
                p.slot not in seen,
                "PlacementPlan",
                "placements",
                p.slot,
                "each (model, device group) at most once",
            )
            seen.add(p.slot)
        keys = [u.model_key for u in self.unplaced]
        _check(
            len(set(keys)) == len(keys),
            "PlacementPlan",
            "unplaced",
            keys,
            "each model at most once",
        )
        # canonical order: equal content, equal plan
        object.__setattr__(self, "placements", tuple(sorted(self.placements, key=lambda p: p.slot)))
        object.__setattr__(
            self, "unplaced", tuple(sorted(self.unplaced, key=lambda u: u.model_key))
        )
        object.__setattr__(
            self,
            "binding_constraints",
            tuple(
                sorted(set(self.binding_constraints), key=lambda b: (b.kind, b.subject, b.detail))
            ),
        )
        object.__setattr__(self, "cold_devices", tuple(sorted(set(self.cold_devices))))

    def replicas_of(self, model_key: str) -> int:
        """Total replicas of ``model_key`` over all its placements (hot and cold)."""
        return sum(p.replicas for p in self.placements if p.model_key == model_key)

    def layout(self) -> dict[tuple[str, tuple[str, ...]], tuple[int, str]]:
        """(model, device group) -> (replicas, pool): the content without the reasons."""
        return {p.slot: (p.replicas, p.pool) for p in self.placements}

    def device_load(self) -> dict[str, list[str]]:
        """Device id -> model keys held there (one entry per replica), for display and checks."""
        out: dict[str, list[str]] = {}
        for p in self.placements:
            for d in p.device_ids:
                out.setdefault(d, []).extend([p.model_key] * p.replicas)
        return out
