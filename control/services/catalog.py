"""Model catalog use cases: served models (retired, never deleted) and latency profiles."""

from __future__ import annotations

from control.services import rules as r
from control.services.base import CrudService, Reference
from control.store import records as rec
from control.store import repositories as repo
from db import vocab


class ModelService(CrudService[rec.ModelRecord]):
    """Models; name + version is unique. Sizes in MiB, load time in ms, cost in milli-units."""

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
        r.one_of("status", vocab.MODEL_STATUSES),
    )
    unique_keys = (("name", "version"),)
    retired_status = "retired"


class LatencyProfileService(CrudService[rec.LatencyProfileRecord]):
    """One measured point per (model, device type, batch size, tokens); replaced by update."""

    entity = "latency_profile"
    repository = repo.LatencyProfileRepository
    rules = (
        r.text("device_type", 64),
        r.at_least("batch_size", 1),
        r.at_least("num_tokens", 0),
        r.at_least("latency_us", 0),
        r.at_least("decode_us_per_token", 0),
    )
    references = (Reference("model_id", repo.ModelRepository, "model"),)
    unique_keys = (("model_id", "device_type", "batch_size", "num_tokens"),)
    stamp_field = "measured_at"
