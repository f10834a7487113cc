"""Model catalog use cases: served models (retired, never deleted) and latency profiles."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from control.clock import utcnow
from control.services import rules as r
from control.services.base import CrudService, Reference
from control.services.errors import ValidationError
from control.services.model_sources import LazyRoots, SourceRoots
from control.store import records as rec
from control.store import repositories as repo
from db import vocab


class ModelService(CrudService[rec.ModelRecord]):
    """Models; name + version is unique. Sizes in MiB, load time in ms, cost in milli-units.

    A model with ``weights_source=path`` must name a folder under ``source_roots`` (default:
    the settings' ``model_source_roots``, see :mod:`control.services.model_sources`), checked
    whenever a create or update sets the source or the location.
    """

    entity = "model"
    repository = repo.ModelRepository
    rules = (
        r.text("name", 200),
        r.text("version", 64),
        r.one_of("task", vocab.MODEL_TASKS),
        r.one_of("weights_source", vocab.WEIGHT_SOURCES),
        r.text("weights_location", 500),
        r.positive("memory_mib"),
        r.each_of("precisions", vocab.PRECISIONS),
        r.at_least("load_time_ms", 0),
        r.at_least("max_batch_size", 1),
        r.at_least("max_batch_tokens", 1),
        r.at_least("tp_degree", 1),
        r.at_least("cost_weight_milli", 0),
        r.boolean("continuous_batching"),
        r.at_least("prefill_chunk_tokens", 0),
        r.at_least("min_replicas", 0),
        r.at_least("max_replicas", 1),
        r.positive("scale_out_delay_ms"),
        r.positive("idle_ms"),
        r.one_of("status", vocab.MODEL_STATUSES),
    )
    unique_keys = (("name", "version"),)
    retired_status = "retired"

    def __init__(
        self,
        factory: sessionmaker[Session],
        clock: Callable[[], datetime] = utcnow,
        *,
        source_roots: Iterable[Path | str] | None = None,
    ) -> None:
        super().__init__(factory, clock)
        self._roots = LazyRoots(source_roots)

    def source_roots(self) -> SourceRoots:
        """The roots local model folders must lie under (read from the settings on first use
        when none were given)."""
        return self._roots.get()

    def _check_values(self, values: Mapping[str, Any]) -> None:
        # a create always names the task; an update is caught here when it sends both fields
        if "task" in values:
            continuous_batching_allowed(values, changed=values.keys())
        if "prefill_chunk_tokens" in values and "continuous_batching" in values:
            prefill_chunking_allowed(values, changed=values.keys())

    def _check_in_db(self, session: Session, merged: Mapping[str, Any], current: Any) -> None:
        # an update of one field must not leave the stored pair contradictory either
        changed = [k for k, v in merged.items() if current is None or getattr(current, k) != v]
        continuous_batching_allowed(merged, changed=changed)
        prefill_chunking_allowed(merged, changed=changed)
        autoscaling_allowed(merged)
        moved = "weights_source" in changed or "weights_location" in changed
        if moved and merged.get("weights_source") == "path":
            self.source_roots().confine("weights_location", merged.get("weights_location"))


class LatencyProfileService(CrudService[rec.LatencyProfileRecord]):
    """One measured point per (model, variant, device type, batch size, tokens); replaced by
    update. ``variant`` is the precision variant measured ("": the base model)."""

    entity = "latency_profile"
    repository = repo.LatencyProfileRepository
    rules = (
        r.text("device_type", 64),
        r.at_least("batch_size", 1),
        r.at_least("num_tokens", 0),
        r.at_least("latency_us", 0),
        r.at_least("decode_us_per_token", 0),
        r.one_of("variant", ("", *vocab.PRECISIONS)),
    )
    references = (Reference("model_id", repo.ModelRepository, "model"),)
    unique_keys = (("model_id", "variant", "device_type", "batch_size", "num_tokens"),)
    stamp_field = "measured_at"


#: Why the setting is refused for other tasks (the core refuses such a ModelSpec too).
ONLY_GENERATE = (
    "only generate models batch continuously (new requests join a running decode loop); "
    "other tasks run each batch once, with no loop to join"
)


def continuous_batching_allowed(model: Mapping[str, Any], changed: Collection[str]) -> None:
    """Refuse ``continuous_batching`` true on a model whose ``task`` is not ``generate``.

    ``model`` holds the values the row would have; ``changed`` names the fields the call
    changes. The error names ``continuous_batching``, unless the call changes only the task
    away from generate while the stored flag is on: then it names ``task``, the field the
    operator touched. Pure: raises ValidationError or returns None.
    """
    if not model.get("continuous_batching") or model.get("task") == "generate":
        return
    task = model.get("task")
    if "task" in changed and "continuous_batching" not in changed:
        raise ValidationError(
            "task", task, f"continuous_batching is on for this model and {ONLY_GENERATE}; "
            "turn continuous_batching off in the same change",
        )  # fmt: skip
    raise ValidationError("continuous_batching", True, f"task is {task!r}: {ONLY_GENERATE}")


def prefill_chunking_allowed(model: Mapping[str, Any], changed: Collection[str]) -> None:
    """Refuse ``prefill_chunk_tokens`` above 0 on a model without ``continuous_batching``: the
    chunks interleave with a running decode loop, which only such a model has. The error names
    the field the call changed (``continuous_batching`` when it turns the loop off under a
    stored budget). Pure: raises ValidationError or returns None."""
    chunk = model.get("prefill_chunk_tokens") or 0
    if not chunk or model.get("continuous_batching"):
        return
    if "continuous_batching" in changed and "prefill_chunk_tokens" not in changed:
        raise ValidationError(
            "continuous_batching", False, f"prefill_chunk_tokens is {chunk} for this model: "
            "chunked prefill needs continuous batching; set prefill_chunk_tokens to 0 in the "
            "same change",
        )  # fmt: skip
    raise ValidationError(
        "prefill_chunk_tokens", chunk,
        "chunked prefill needs continuous_batching (the decode loop its chunks interleave with)",
    )  # fmt: skip


def autoscaling_allowed(model: Mapping[str, Any]) -> None:
    """Refuse ``min_replicas`` above ``max_replicas`` as the row would hold them (the message
    names both; the durations' own rules run before). Pure: raises ValidationError naming the
    field at fault, or returns None."""
    # imported here: the ``legato`` command loads the services before it installs the native
    # (compiled) core, and a core module imported earlier would run its Python source
    from control.core.autoscale_rules import autoscaling_problems

    found = autoscaling_problems(model.get("min_replicas") or 0, model.get("max_replicas"),
                                 None, None)  # fmt: skip
    if found:
        field, why = found[0]
        raise ValidationError(field, model.get(field), why)
