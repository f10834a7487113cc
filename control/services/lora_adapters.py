"""Tenants' LoRA adapters: registered on a base generate model from a local PEFT folder,
listed, retired (never deleted: usage rows name them), and resolved for a run.

Registration reads the folder (:mod:`lora_folders`): it must lie under the model source roots
(as local model folders must, :mod:`model_sources`), hold a LoRA ``adapter_config.json`` and
weights, and its target modules must exist in the base (when the base's weights are a local
folder). ``rank`` and ``memory_mib`` are read from the folder, never taken from the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from control.clock import utcnow
from control.services import lora_folders as lf
from control.services import rules as r
from control.services.base import CrudService, Reference
from control.services.errors import ValidationError
from control.services.model_sources import LazyRoots
from control.store import repositories as repo
from control.store.adapters import LoraAdapterRecord, LoraAdapterRepository

#: The adapter's name on a replica (a PEFT adapter name): unique across tenants, stable.
REPLICA_NAME = "lora-{id}"


def replica_name(record: LoraAdapterRecord) -> str:
    """What the core and the executor call this adapter (``lora-<id>``)."""
    return REPLICA_NAME.format(id=record.id)


class LoraAdapterService(CrudService[LoraAdapterRecord]):
    """LoRA adapters; (tenant, model, name) is unique (a retired name stays taken)."""

    entity = "lora_adapter"
    repository = LoraAdapterRepository
    rules = (
        r.text("name", 100),
        r.text("path", 500),
        r.positive("tenant_id"),
        r.positive("model_id"),
        r.at_least("load_time_ms", 0),
    )
    references = (
        Reference("tenant_id", repo.TenantRepository, "tenant"),
        Reference("model_id", repo.ModelRepository, "model"),
    )
    unique_keys = (("tenant_id", "model_id", "name"),)
    updatable = frozenset({"load_time_ms"})
    retired_status = "retired"

    def __init__(
        self,
        factory: sessionmaker[Session],
        clock: Callable[[], datetime] = utcnow,
        *,
        source_roots: Iterable[Path | str] | None = None,
    ) -> None:
        super().__init__(factory, clock)
        self._roots = LazyRoots(source_roots, what="an adapter folder")

    def create(self, actor: str, **values: Any) -> LoraAdapterRecord:
        """Register an adapter: the folder is confined and read first (ValidationError naming
        ``path``), then the row is written with the folder's rank and size, audited."""
        for given in ("rank", "memory_mib"):
            if given in values:
                raise ValidationError(given, values[given], "is read from the adapter folder")
        self._check_fields(values, creating=True)
        folder = self._roots.get().confine("path", values["path"])
        found = lf.read_adapter(folder)
        return super().create(
            actor, **{**values, "path": str(folder), "rank": found.rank,
                      "memory_mib": found.memory_mib},
        )  # fmt: skip

    def _check_in_db(self, session: Session, merged: Mapping[str, Any], current: Any) -> None:
        if current is not None:
            return  # only load_time_ms changes after registration
        tenant = repo.TenantRepository(session).get(merged["tenant_id"])
        if tenant is not None and tenant.status != "active":
            raise ValidationError("tenant_id", tenant.id, f"tenant is {tenant.status}")
        model = repo.ModelRepository(session).get(merged["model_id"])
        if model is None:
            return  # the reference check names it
        if model.task != "generate" or model.status != "active":
            raise ValidationError(
                "model_id", model.id,
                f"adapters go on an active generate model ({model.name} is a "
                f"{model.status} {model.task} model)",
            )  # fmt: skip
        if model.weights_source == "path":
            modules = lf.base_modules(Path(model.weights_location))
            if modules is not None:
                lf.check_fits(lf.read_adapter(Path(merged["path"])), modules)

    def resolve(self, tenant_id: int, name: str) -> LoraAdapterRecord:
        """The tenant's active adapter ``name``; ValidationError naming ``adapter`` when it has
        none by that name (another tenant's adapter is not found either)."""
        found = [a for a in self.list(tenant_id=tenant_id, name=name) if a.status == "active"]
        if not found:
            raise ValidationError("adapter", name, "the tenant has no active adapter by this name")
        if len(found) > 1:
            models = sorted(a.model_id for a in found)
            raise ValidationError(
                "adapter", name, f"names adapters on several models ({models}); rename one"
            )
        return found[0]
