"""A run's ``adapter``: the calling tenant's LoRA adapter, resolved before the run is recorded.

The name must be one of the tenant's active adapters (another tenant's is not found either)
and the workflow must have a generate step on the adapter's base model; otherwise the call is
refused with a ValidationError naming ``adapter`` and nothing is written. The resolved adapter
travels in the run's sampling under ``control.runtime.lora.LORA``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from control.runtime.lora import LORA
from control.services.errors import ValidationError
from control.services.lora_adapters import replica_name


def resolve_adapter(services: Any, tenant_id: int, name: str) -> dict[str, Any]:
    """(DB thread) The tenant's adapter ``name`` as the run carries it."""
    record = services.lora_adapters.resolve(tenant_id, name)
    model = services.models.get(record.model_id)
    load_s = (record.load_time_ms or 0) / 1000.0
    return {"name": replica_name(record), "path": record.path,
            "model": f"{model.name}:{model.version}", "load_s": load_s,
            "adapter": record.name}  # fmt: skip


async def attach_adapter(
    inference: Any,
    tenant_id: int | None,
    workflow: tuple[str, str],
    name: str | None,
    sampling: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``sampling`` with the run's resolved adapter under ``LORA`` (a copy; unchanged without
    ``name``); ValidationError naming ``adapter`` when the tenant has no such adapter or the
    workflow (``(name, version)``) no step it applies to."""
    if not name or tenant_id is None:
        return dict(sampling or {})
    lora = await inference.writer.run_in_db_thread(
        resolve_adapter, inference.services, tenant_id, name
    )
    spec = inference.catalog.workflows.get(f"{workflow[0]}:{workflow[1]}")
    if spec is not None:
        models = {n.model for n in spec.nodes if n.task == "generate"}
        if lora["model"] not in models:
            raise ValidationError(
                "adapter", name,
                f"the adapter is on {lora['model']}; workflow {':'.join(workflow)} has no "
                "generate step "
                f"on that model (its generate models: {sorted(m for m in models if m)})",
            )  # fmt: skip
    return {**(sampling or {}), LORA: lora}
