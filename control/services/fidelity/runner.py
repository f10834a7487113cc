"""Fidelity validations started through the API: one at a time, in a worker process, each
stored as a fidelity report.

A validation loads a model, starts its own executor worker and runs for about a minute per
repeat, so it never runs inside a request: ``FidelityRunner.start`` spawns a process that runs
``validate_repeated`` and stores the result (``FidelityReportService.store``), and returns at
once. A failed validation is logged by the worker and stores nothing.
"""

from __future__ import annotations

import logging
import multiprocessing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from control import native
from control.services.fidelity.config import TRACE, FidelityConfig
from control.services.fidelity.validate import config_dict, validate_repeated

log = logging.getLogger(__name__)
ACTOR = "fidelity-runner"


class ValidationRunning(RuntimeError):
    """A validation is already running (two would compete for the same cores)."""


@dataclass(frozen=True)
class FidelityRequest:
    """What an operator may choose for an API-started validation."""

    requests: int = 120
    rate_factor: float | None = None
    load: float = 0.5
    slo_s: float = 0.1
    repeats: int = 1

    def config(self) -> FidelityConfig:
        return FidelityConfig(rate_factor=self.rate_factor, target_utilization=self.load,
                              max_requests=self.requests, slo_s=self.slo_s)  # fmt: skip


@native.entry_point  # the spawned worker runs the compiled core when there is one
def validate_and_store(database_url: str, config: Mapping[str, Any], repeats: int) -> None:
    """Worker body: validate, then store the result as a fidelity report (never raises)."""
    from control.services.fidelity_reports import FidelityReportService
    from db.session import make_engine, make_session_factory

    try:
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in config.items()}
        cfg = FidelityConfig(**values)
        result = validate_repeated(cfg, repeats)
        factory = make_session_factory(make_engine(database_url))
        stored = config_dict(cfg) | {"repeats": repeats, "started_by": "api"}
        FidelityReportService(factory).store(ACTOR, TRACE, stored, result)
    except Exception:  # noqa: BLE001 - a worker logs its failure and ends
        log.exception("fidelity validation failed")


class FidelityRunner:
    """Starts validations in spawned processes, one at a time. ``target`` is the worker body
    (``validate_and_store``; tests pass a short stand-in with the same arguments)."""

    def __init__(
        self, database_url: str, target: Callable[[str, Mapping[str, Any], int], None] | None = None
    ) -> None:
        self._url = database_url
        self._target = target or validate_and_store
        self._proc: multiprocessing.process.BaseProcess | None = None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.is_alive()

    @property
    def exit_code(self) -> int | None:
        """Exit code of the last validation's process (None while it runs or before any)."""
        return None if self._proc is None else self._proc.exitcode

    def start(self, request: FidelityRequest) -> None:
        """Start one validation; raises ValidationRunning while another one runs."""
        if self.running:
            raise ValidationRunning("a fidelity validation is already running; wait for its report")
        cfg = config_dict(request.config())
        proc = multiprocessing.get_context("spawn").Process(
            target=self._target, args=(self._url, cfg, request.repeats), daemon=True
        )
        proc.start()
        self._proc = proc

    def wait(self, timeout_s: float | None = None) -> None:
        """Join the running validation (tests, shutdown)."""
        if self._proc is not None:
            self._proc.join(timeout_s)
