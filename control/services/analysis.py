"""Analysis use cases: stored traces and what-if runs of the twin."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from control.config import Settings, get_settings
from control.services import rules as r
from control.services.base import CrudService
from control.services.model_sources import SourceRoots
from control.store import records as rec
from control.store import repositories as repo
from db import vocab

#: The traces the repository ships (what the demo seed registers).
SHIPPED_TRACES_DIR = Path(__file__).resolve().parents[2] / "sim" / "traces" / "data"


def trace_roots(settings: Settings) -> list[Path]:
    """The roots the settings name; by default the var dir and the shipped traces folder."""
    return list(settings.trace_roots) or [settings.var_dir, SHIPPED_TRACES_DIR]


class TraceService(CrudService[rec.TraceRecord]):
    """Traces on disk; ``attribution`` keeps the source and license line with the data.

    A trace's ``path`` must lie under the trace roots (``LEGATO_TRACE_ROOTS``, symlinks
    resolved), like model folders under theirs: a registered trace is read by the twin, so a
    path elsewhere would let a registration make the service read any file."""

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
    #: None: read from the settings on first use (tests may set a SourceRoots on the service)
    roots: SourceRoots | None = None

    def confine_to(self, roots: Iterable[Path | str]) -> None:
        self.roots = SourceRoots(roots, "a trace file", "LEGATO_TRACE_ROOTS", "trace roots")

    def _check_values(self, values: Mapping[str, Any]) -> None:
        if "path" in values:
            if self.roots is None:
                self.confine_to(trace_roots(get_settings()))
            assert self.roots is not None
            self.roots.confine("path", values["path"])


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
