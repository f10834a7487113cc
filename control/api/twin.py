"""The gateway's handle on the twin's what-if engine (``control.services.whatif``).

``submit(actor, run_id)`` starts a stored pending run in a worker process (``run_whatif``: it
moves the run to running, reports progress and finishes it with results or the error); the
request that asked returns at once. ``prepare(scenario)`` fills a missing ``baseline`` with the
state in force now and turns the operator's changes (a headroom reservation as it would be saved,
a quota scale, a plan, a workflow version) into the twin's sections, so a console can send only a
workload and the changes to try.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Mapping
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from control.services.whatif import prepare_scenario, run_whatif


class TwinEngine:
    """Starts what-if runs of the database at ``database_url`` in spawned processes."""

    def __init__(self, factory: sessionmaker[Session], database_url: str) -> None:
        self._factory = factory
        self._url = database_url
        self._procs: dict[int, Any] = {}

    def prepare(self, scenario: Mapping[str, Any]) -> dict[str, Any]:
        """The scenario to store (``control.services.whatif.prepare_scenario``): ``baseline``
        defaults to the live fleet under ``workload``, operator changes become twin sections.
        Raises the service's ValidationError (a 422 naming the field) for a change it refuses."""
        return prepare_scenario(self._factory, scenario)

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
