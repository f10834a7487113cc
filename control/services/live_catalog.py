"""The gateway's view of what the live core runs now: workflows, models, tenants' classes.

Built from the runtime's start-up blueprint and kept current by the live configuration feed
(:mod:`control.services.live_config`) after each committed admin change, so the hot path answers
"can this workflow run here?" and "what is this tenant's default class?" from memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from control.core.dag.spec import DagSpec
from control.core.tenancy.base import TenancyConfig
from control.core.types import ModelSpec

DEFAULT_PRIORITY = "standard"


@dataclass
class LiveCatalog:
    workflows: dict[str, DagSpec] = field(default_factory=dict)  # "name:version" -> spec
    models: dict[str, ModelSpec] = field(default_factory=dict)  # "name:version" -> spec
    tenancy: TenancyConfig = field(default_factory=TenancyConfig)
    _priority: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, blueprint: Any) -> LiveCatalog:
        """The catalog of a core blueprint (``CoreBlueprint``)."""
        catalog = cls(
            workflows={w.workflow: w for w in blueprint.workflows},
            models={m.key: m for m in blueprint.models},
        )
        catalog.set_tenancy(blueprint.tenancy)
        return catalog

    def has_workflow(self, key: str) -> bool:
        return key in self.workflows

    def priority_of(self, tenant_name: str) -> str:
        """The tenant's default priority class (``standard`` for one the core does not know)."""
        return self._priority.get(tenant_name, DEFAULT_PRIORITY)

    def output_refs(self, name: str, version: str) -> Mapping[str, str]:
        """Output name -> "node.port" of a live workflow (empty when unknown)."""
        spec = self.workflows.get(f"{name}:{version}")
        return {} if spec is None else dict(spec.outputs)

    def set_tenancy(self, config: TenancyConfig) -> None:
        self.tenancy = config
        self._priority = {t.tenant_id: t.priority_class for t in config.tenants}
