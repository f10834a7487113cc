"""The running core's policies, read and changed without a restart (``/admin/policies``).

The policies in force are the live runtime's blueprint (``core_config`` and the tenancy half's
fair-share policy): what the core was built with, replaced by every accepted change, so a
driver rebuilt from it keeps them. A change is merged and checked field by field
(:mod:`control.services.policy_doc`; only the fields :mod:`control.services.policy_fields`
marks live), handed to the core as one ``PoliciesChanged`` (applied whole or refused), and
audited with what each changed field was before and after. Changes are made one at a time.
A restart starts again from the settings (``LEGATO_BATCHING`` ... ``LEGATO_CORE_POLICIES``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from control.clock import utcnow
from control.core.events import PoliciesChanged
from control.services.audit import AuditService
from control.services.policy_doc import Policies, PolicyFieldError, document, merge
from control.services.policy_fields import LIVE_FIELDS


class LivePolicies:
    """Reads and changes the policies of ``runtime`` (a ``LiveRuntime``: its ``blueprint``
    and ``ingest``)."""

    def __init__(
        self, runtime: Any, audit: AuditService, clock: Callable[[], datetime] = utcnow
    ) -> None:
        self._runtime = runtime
        self._audit = audit
        self._clock = clock
        self._lock = asyncio.Lock()

    def current(self) -> Policies:
        """The policies in force now."""
        bp = self._runtime.blueprint
        tenancy = bp.tenancy_config
        return Policies(bp.core_config, tenancy.fair_share, tenancy.fair_share_config)

    async def change(self, actor: str, changes: Mapping[str, Any]) -> Policies:
        """Apply ``changes`` (a partial policy document) to the running core and audit it.
        Raises PolicyFieldError naming the field for a change refused (nothing applied)."""
        async with self._lock:
            before = self.current()
            after = merge(before, changes, LIVE_FIELDS)
            fair = (after.fair_share, after.fair_share_config)
            swapped = fair != (before.fair_share, before.fair_share_config)
            event = PoliciesChanged(after.core, *(fair if swapped else (None, None)))
            try:
                await self._runtime.ingest(event)
            except (ValueError, TypeError) as exc:  # the core's own checks refused it
                raise PolicyFieldError(next(iter(changes), "body"), str(exc)) from None
            bp = self._runtime.blueprint
            tenancy = replace(bp.tenancy_config, fair_share=fair[0], fair_share_config=fair[1])
            self._runtime.blueprint = replace(bp, core_config=after.core, tenancy_config=tenancy)
            old, new = document(before), document(after)
            await asyncio.to_thread(
                self._audit.record, at=self._clock(), actor=actor, action="update",
                entity_type="core_policies", entity_id="live",
                before={k: old[k] for k in changes}, after={k: new[k] for k in changes},
            )  # fmt: skip
            return after
