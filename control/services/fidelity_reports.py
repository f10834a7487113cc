"""Fidelity reports: every measured error of the twin, stored so operators see it beside each
twin prediction.

A report is written once (``store``) by ``legato sim validate --store`` or an API-started
validation and never changed; ``latest`` and ``page`` read them newest first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

from control.services import rules as r
from control.services.base import CrudService
from control.services.errors import Conflict
from control.store.base import PageOf
from control.store.fidelity_reports import FidelityReportRecord, FidelityReportRepository
from db.session import session_scope

#: What ``latest`` callers show when nothing was measured yet.
NO_REPORT = "no fidelity report yet: run `legato sim validate --store`"


def _finite(field: str, low: float | None = None) -> r.Rule:
    def ok(v: Any) -> bool:
        number = isinstance(v, int | float) and not isinstance(v, bool)
        return number and math.isfinite(v) and (low is None or v >= low)

    bound = "" if low is None else f" >= {low}"
    return r.Rule(field, ok, f"must be a finite number{bound}")


class NoFidelityReport(LookupError):
    """No report is stored yet (an expected state on a fresh install)."""

    def __init__(self) -> None:
        super().__init__(NO_REPORT)


class FidelityReportService(CrudService[FidelityReportRecord]):
    """Append-only store of validation results (create is audited; no update or delete)."""

    entity = "fidelity_report"
    repository = FidelityReportRepository
    rules = (
        r.text("trace", 200),
        r.mapping("config"),
        _finite("p50_error", 0.0),
        _finite("p99_error", 0.0),
        _finite("slo_attainment_error_pp"),
        r.mapping("live"),
        r.mapping("twin"),
    )
    updatable: ClassVar[frozenset[str] | None] = frozenset()
    #: Pages go newest first by creation time (then id).
    page_order: ClassVar[str] = "created_at"

    def store(
        self, actor: str, trace: str, config: Mapping[str, Any], result: Mapping[str, Any]
    ) -> FidelityReportRecord:
        """Store one validation ``result`` (the dict ``validate_fidelity`` returns: its
        ``p50_error``, ``p99_error``, ``slo_attainment_error_pp``, ``live`` and ``twin``; every
        other key goes into ``config`` under ``result_extra``). Raises ValidationError naming a
        missing or non-finite figure. Returns the stored record."""
        known = ("p50_error", "p99_error", "slo_attainment_error_pp", "live", "twin")
        extra = {k: v for k, v in result.items() if k not in known}
        values = {k: result.get(k) for k in known}
        return self.create(
            actor, trace=trace, config={**dict(config), "result_extra": extra}, **values
        )

    def latest(self) -> FidelityReportRecord:
        """The newest report; raises NoFidelityReport when none is stored."""
        with session_scope(self._factory) as session:
            found = FidelityReportRepository(session).latest()
        if found is None:
            raise NoFidelityReport()
        return found

    def newest_first(
        self, *, offset: int = 0, limit: int | None = None
    ) -> PageOf[FidelityReportRecord]:
        """A page of reports, newest first; ValidationError names a bad bound."""
        return self.page(offset=offset, limit=limit, newest_first=True)

    def update(self, actor: str, id_: Any, **changes: Any) -> FidelityReportRecord:
        """Refused: a report is a measurement, kept as it was taken."""
        raise Conflict("a fidelity report is a measurement: it is never changed")

    def delete(self, actor: str, id_: Any) -> None:
        """Refused: the history of the twin's error is append-only."""
        raise Conflict("fidelity reports are append-only: they are never deleted")
