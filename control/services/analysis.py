"""Analysis use cases: stored traces and what-if runs of the twin."""

from __future__ import annotations

from typing import Any

from control.services import rules as r
from control.services.base import CrudService
from control.store import records as rec
from control.store import repositories as repo
from db import vocab


class TraceService(CrudService[rec.TraceRecord]):
    """Traces on disk; ``attribution`` keeps the source and license line with the data."""

    entity = "trace"
    repository = repo.TraceRepository
    rules = (
        r.text("name", 200),
        r.one_of("format", vocab.TRACE_FORMATS),
        r.text("path", 500),
        r.at_least("num_rows", 0),
        r.free_text("attribution"),
    )
    unique_keys = (("name",),)


class WhatIfService(CrudService[rec.WhatIfRunRecord]):
    """What-if runs: created pending, moved by the twin's runner, finished with results."""

    entity = "whatif_run"
    repository = repo.WhatIfRunRepository
    rules = (
        r.one_of("status", vocab.WHATIF_STATUSES),
        r.between("progress_milli", 0, 1000),
        r.mapping("scenario"),
        r.mapping("results"),
        r.free_text("error"),
    )
    updatable = frozenset({"status", "progress_milli"})

    def finish(
        self,
        actor: str,
        run_id: int,
        *,
        results: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> rec.WhatIfRunRecord:
        """End a run: succeeded with ``results``, or failed with ``error``; audited ``finish``."""
        status = "failed" if error is not None else "succeeded"
        changes = {"status": status, "results": results, "error": error, "progress_milli": 1000}
        r.validate(self.rules, changes)
        changes["finished_at"] = self._clock()
        return self._update(actor, run_id, changes, "finish", check=False)
