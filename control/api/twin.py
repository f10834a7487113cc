"""The gateway's handle on the twin's what-if engine (``control.services.whatif``).

``submit(actor, run_id)`` starts a stored pending run in a worker process (``run_whatif``: it
moves the run to running, reports progress and finishes it with results or the error); the
request that asked returns at once. ``prepare(scenario)`` fills a missing ``baseline`` with the
state in force now, so a console can send only a workload and the variants to try.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Mapping
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from control.services.whatif import run_whatif, scenario_from_db


class TwinEngine:
    """Starts what-if runs of the database at ``database_url`` in spawned processes."""

    def __init__(self, factory: sessionmaker[Session], database_url: str) -> None:
        self._factory = factory
        self._url = database_url
        self._procs: dict[int, Any] = {}

    def prepare(self, scenario: Mapping[str, Any]) -> dict[str, Any]:
        """The scenario to store: ``baseline`` defaults to the live fleet under ``workload``."""
        out = dict(scenario)
        if "baseline" not in out and isinstance(out.get("workload"), Mapping):
            out["baseline"] = scenario_from_db(self._factory, out["workload"])
        return out

    def submit(self, actor: str, run_id: int) -> None:
        """Start the run's worker; returns at once (``actor`` is recorded by the API)."""
        proc = multiprocessing.get_context("spawn").Process(
            target=run_whatif, args=(self._url, run_id), daemon=True
        )
        proc.start()
        self._procs[run_id] = proc

    def wait(self, run_id: int, timeout_s: float | None = None) -> None:
        """Join the worker of ``run_id`` (tests, the CLI)."""
        proc = self._procs.get(run_id)
        if proc is not None:
            proc.join(timeout_s)
