"""Repository of fidelity reports (the twin's measured error against the live stack)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select

from control.store.base import Repository
from db.models.analysis import FidelityReport


@dataclass(frozen=True)
class FidelityReportRecord:
    id: int
    created_at: datetime
    trace: str
    config: dict[str, Any]
    p50_error: float
    p99_error: float
    slo_attainment_error_pp: float
    live: dict[str, Any]
    twin: dict[str, Any]


class FidelityReportRepository(Repository[FidelityReport, FidelityReportRecord]):
    row_type = FidelityReport
    record_type = FidelityReportRecord

    def latest(self) -> FidelityReportRecord | None:
        """The newest report (latest ``created_at``, then highest id), or None when empty."""
        query = (
            select(FidelityReport)
            .order_by(FidelityReport.created_at.desc(), FidelityReport.id.desc())
            .limit(1)
        )
        row = self.session.scalars(query).first()
        return None if row is None else self.to_record(row)
