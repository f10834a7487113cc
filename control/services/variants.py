"""Precision variants of served models: register, list, retire, and record their measurements.

A variant is one ``model_variants`` row per (model, precision). Registering refuses, before
anything is written, with an error naming the field:

* ``precision`` not in the vocabulary (422), or the base's own precision ``fp32`` (422: the
  base model itself serves it);
* ``precision`` the executor cannot convert a model with local weights to (``fp8``, ``q4_1``:
  422 naming why). A ``declared`` model (the twin's, never loaded) may register any precision;
* a variant of that precision already active (409 naming ``precision``). A retired one is
  brought back (status active again, audited as ``update``) instead of a second row.

Measurements (memory, load time, quality JSON and its time) are written by ``legato profile``
through :meth:`VariantService.record_measurement`. Every mutation is one audited transaction.
The quality floor for exact traffic (setting ``exact_quality_floor``) is read out with the list.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from control.clock import utcnow
from control.executor.precisions import RUNNABLE
from control.services import rules as r
from control.services.base import CrudService, Reference
from control.services.errors import DuplicateName, NotFound, ValidationError
from control.store import repositories as repo
from control.store.variants import VariantRecord, VariantRepository
from db import vocab
from db.models.variants import VARIANT_STATUSES

BASE_PRECISION = "fp32"
#: What the executor converts a float32 model to, without the base's own fp32.
RUNNABLE_VARIANTS = tuple(p for p in RUNNABLE if p != BASE_PRECISION)
QUALITY_METRICS = ("cosine", "ranking_agreement", "token_agreement", "label_agreement")
_WHY_NOT = {
    "fp8": "the executor has no maintained fp8 path; register int8 instead",
    "q4_1": "q4_1 is the GGUF source format (loaded as fp32), not a variant",
}


class VariantService(CrudService[VariantRecord]):
    """Precision variants; (model, precision) is unique. Memory in MiB, load time in ms."""

    entity = "model_variant"
    repository = VariantRepository
    rules = (
        r.one_of("precision", vocab.PRECISIONS),
        r.positive("memory_mib"),
        r.at_least("load_time_ms", 0),
        r.at_least("cost_weight_milli", 0),
        r.mapping("quality"),
        r.one_of("status", VARIANT_STATUSES),
    )
    references = (Reference("model_id", repo.ModelRepository, "model"),)
    retired_status = "retired"

    def __init__(
        self,
        factory: sessionmaker[Session],
        clock: Callable[[], datetime] = utcnow,
        *,
        exact_floor: float | None = None,
    ) -> None:
        super().__init__(factory, clock)
        self._floor = exact_floor

    def exact_floor(self) -> float:
        """The quality score below which a variant serves no exact traffic (the setting
        ``exact_quality_floor`` unless one was given)."""
        if self._floor is None:
            from control.config import get_settings

            self._floor = get_settings().exact_quality_floor
        return self._floor

    def register(self, actor: str, model_id: int, precision: Any, **values: Any) -> VariantRecord:
        """Add the variant ``precision`` of ``model_id`` (see the module docstring for what is
        refused); returns its record."""
        fields = {"model_id": model_id, "precision": precision, **values}
        self._check_fields(fields, creating=True)
        if precision == BASE_PRECISION:
            raise ValidationError("precision", precision, "is the base model's own precision")

        def work(session: Session) -> VariantRecord:
            model = repo.ModelRepository(session).get(model_id)
            if model is None:
                raise NotFound("model", model_id)
            if model.weights_source != "declared" and precision not in RUNNABLE_VARIANTS:
                why = _WHY_NOT.get(precision, f"runnable: {', '.join(RUNNABLE_VARIANTS)}")
                raise ValidationError("precision", precision, f"not runnable here: {why}")
            found = self.repository(session).find_one(model_id=model_id, precision=precision)
            if found is not None and found.status != self.retired_status:
                raise DuplicateName(self.entity, {"model_id": model_id, "precision": precision})
            if found is not None:
                after = self.repository(session).update(found.id, status="active", **values)
                self._audit(session, actor, "update", after, found, after)
                return after
            record = self.repository(session).add(**fields, created_at=self._clock())
            self._audit(session, actor, "create", record, None, record)
            return record

        return self._run(work, self.entity)

    def of_model(self, model_id: int, *, include_retired: bool = False) -> list[VariantRecord]:
        """The variants of ``model_id``, oldest first (active ones only unless asked)."""
        rows = self.list(model_id=model_id)
        return [v for v in rows if include_retired or v.status != self.retired_status]

    def find(self, model_id: int, precision: str) -> VariantRecord:
        """The variant ``precision`` of ``model_id``; NotFound naming both when there is none."""
        found = [v for v in self.list(model_id=model_id) if v.precision == precision]
        if not found:
            raise NotFound(self.entity, f"{model_id}@{precision}")
        return found[0]

    def retire_precision(self, actor: str, model_id: int, precision: str) -> VariantRecord:
        """Retire the variant ``precision`` of ``model_id`` (audited; no-op when retired)."""
        return self.retire(actor, self.find(model_id, precision).id)

    def record_measurement(
        self,
        actor: str,
        variant_id: int,
        *,
        memory_mib: int | None = None,
        load_time_ms: int | None = None,
        quality: Mapping[str, Any] | None = None,
    ) -> VariantRecord:
        """Store what ``legato profile`` measured (only the values given); a quality JSON is
        checked (metric, score) and stamped with ``quality_measured_at``. Audited."""
        changes: dict[str, Any] = {}
        if memory_mib is not None:
            changes["memory_mib"] = memory_mib
        if load_time_ms is not None:
            changes["load_time_ms"] = load_time_ms
        if quality is not None:
            check_quality(quality)
            changes["quality"] = dict(quality)
        self._check_fields(changes, creating=False)
        if "quality" in changes:
            changes["quality_measured_at"] = self._clock()
        return self._update(actor, variant_id, changes, "measure", check=False)


def check_quality(quality: Mapping[str, Any]) -> None:
    """Refuse a quality JSON without a known ``metric`` or a ``score`` in [-1, 1] (a cosine
    may be negative; the agreements are in [0, 1])."""
    if quality.get("metric") not in QUALITY_METRICS:
        raise ValidationError("quality.metric", quality.get("metric"), f"one of {QUALITY_METRICS}")
    score = quality.get("score")
    if isinstance(score, bool) or not isinstance(score, int | float) or not -1 <= score <= 1:
        raise ValidationError("quality.score", score, "must be a number in [-1, 1]")
