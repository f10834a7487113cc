"""Placement use cases: plans (draft -> simulated -> active -> retired/rolled_back) and the
placements inside them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.orm import Session

from control.services import rules as r
from control.services.base import CrudService, Reference
from control.services.errors import Conflict, UnknownReference, ValidationError
from control.store import records as rec
from control.store import repositories as repo
from db import models as m
from db import vocab


class PlacementPlanService(CrudService[rec.PlacementPlanRecord]):
    """Placement plans; ``parent_id`` links a plan to the one it was derived from."""

    entity = "placement_plan"
    repository = repo.PlacementPlanRepository
    rules = (
        r.one_of("status", vocab.PLAN_STATUSES),
        r.text("author", 100),
        r.free_text("note"),
    )
    references = (Reference("parent_id", repo.PlacementPlanRepository, "placement_plan"),)
    retired_status = "retired"

    def activate(self, actor: str, plan_id: int) -> rec.PlacementPlanRecord:
        """Make ``plan_id`` the one active plan; the previously active plan is retired.

        One transaction; one audit record per plan whose status changes. Refuses (Conflict)
        a plan that is retired or rolled back.
        """

        def work(session: Session) -> rec.PlacementPlanRecord:
            plans = repo.PlacementPlanRepository(session)
            target = self._require(session, plan_id)
            if target.status in ("retired", "rolled_back"):
                raise Conflict(f"placement_plan {plan_id} is {target.status}; copy it instead")
            if target.status == "active":
                return target
            for old in plans.list(status="active"):
                after = plans.update(old.id, status="retired")
                self._audit(session, actor, "retire", after, old, after)
            after = plans.update(plan_id, status="active")
            self._audit(session, actor, "activate", after, target, after)
            return after

        return self._run(work, self.entity)


def _device_group(value: Any) -> bool:
    ids = value if isinstance(value, list) else []
    return bool(ids) and all(r.is_int(i) for i in ids) and len(set(ids)) == len(ids)


class PlacementService(CrudService[rec.PlacementRecord]):
    """Replicas of a model on a device group; every device id must name a device. ``variant``
    (a precision, "" the base) must be an active ``ModelVariant`` of the model, and every
    device of the group must run that precision (its ``precisions`` name it, or are empty)."""

    entity = "placement"
    repository = repo.PlacementRepository
    rules = (
        r.Rule("device_ids", _device_group, "must be a non-empty list of distinct device ids"),
        r.at_least("replicas", 1),
        r.one_of("pool", vocab.POOL_KINDS),
        r.free_text("reason"),
        r.Rule("variant", lambda v: v == "" or v in vocab.PRECISIONS,
               f"must be empty (the base) or one of {', '.join(vocab.PRECISIONS)}"),
    )  # fmt: skip
    references = (
        Reference("plan_id", repo.PlacementPlanRepository, "placement_plan"),
        Reference("model_id", repo.ModelRepository, "model"),
    )
    stamp_field = None

    def _check_in_db(self, session: Session, merged: Mapping[str, Any], current: Any) -> None:
        wanted = list(merged["device_ids"])
        missing = sorted(set(wanted) - repo.DeviceRepository(session).existing_ids(wanted))
        if missing:
            raise UnknownReference("device_ids", missing, "device")
        model = repo.ModelRepository(session).get(merged["model_id"])
        if model is not None and len(wanted) % model.tp_degree != 0:
            raise ValidationError(
                "device_ids",
                wanted,
                f"model {model.name} runs on groups of {model.tp_degree} devices "
                "(its tensor-parallel degree)",
            )
        if merged.get("variant"):
            check_variant(session, merged["model_id"], merged["variant"], wanted)


def check_variant(session: Session, model_id: int, precision: str, device_ids: list[int]) -> None:
    """A placed variant exists (active) and every device of its group runs its precision."""
    found = session.query(m.ModelVariant).filter_by(model_id=model_id, precision=precision)
    if not any(v.status == "active" for v in found):
        raise ValidationError(
            "variant", precision, "no active variant of the model at this precision"
        )
    refused = sorted(d.name for d in session.query(m.Device).filter(m.Device.id.in_(device_ids))
                     if d.precisions and precision not in d.precisions)  # fmt: skip
    if refused:
        raise ValidationError("device_ids", device_ids,
                              f"devices {refused} do not run precision {precision}")  # fmt: skip
