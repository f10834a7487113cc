"""Fidelity reports: stored once per validation, read newest first, never changed."""

from __future__ import annotations

import math

import pytest

from control.services.errors import Conflict, ValidationError
from control.services.fidelity_reports import (
    NO_REPORT,
    FidelityReportService,
    NoFidelityReport,
)


def _result(p50: float = 0.05, p99: float = 0.08, pp: float = -1.5) -> dict:
    return {
        "p50_error": p50,
        "p99_error": p99,
        "slo_attainment_error_pp": pp,
        "live": {"p50_s": 0.02, "p99_s": 0.09},
        "twin": {"p50_s": 0.021, "p99_s": 0.097},
        "requests": 120,
    }


@pytest.fixture
def reports(services) -> FidelityReportService:
    return services.fidelity_reports


def test_latest_on_an_empty_table_says_how_to_make_one(reports) -> None:
    with pytest.raises(NoFidelityReport) as info:
        reports.latest()
    assert str(info.value) == NO_REPORT and "legato sim validate --store" in NO_REPORT


def test_store_keeps_every_figure_and_moves_extras_into_config(reports, services) -> None:
    stored = reports.store("cli", "azure_code_slice", {"rate_factor": 1.5}, _result(p50=0.031))
    got = reports.latest()
    assert got == stored
    assert (got.trace, got.p50_error, got.p99_error) == ("azure_code_slice", 0.031, 0.08)
    assert got.slo_attainment_error_pp == -1.5
    assert got.live["p99_s"] == 0.09 and got.twin["p50_s"] == 0.021
    assert got.config == {"rate_factor": 1.5, "result_extra": {"requests": 120}}
    audit = services.audit.list(entity_type="fidelity_report")
    assert [a.action for a in audit] == ["create"]


def test_latest_and_pages_are_newest_first(reports) -> None:
    ids = [reports.store("cli", f"slice-{i}", {}, _result(p50=i / 10)).id for i in range(5)]
    assert reports.latest().id == ids[-1]
    page = reports.newest_first(offset=1, limit=2)
    assert page.total == 5
    assert [r.id for r in page.items] == [ids[3], ids[2]]
    assert [r.trace for r in page.items] == ["slice-3", "slice-2"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("p50_error", -0.1),
        ("p99_error", math.inf),
        ("slo_attainment_error_pp", math.nan),
        ("p50_error", None),
        ("p99_error", "0.1"),
        ("live", [1, 2]),
    ],
)
def test_bad_figures_are_refused_naming_the_field(reports, field, value) -> None:
    bad = _result() | {field: value}
    with pytest.raises(ValidationError) as info:
        reports.store("cli", "slice", {}, bad)
    assert field in str(info.value)
    assert reports.newest_first().total == 0


def test_reports_are_never_changed_or_deleted(reports) -> None:
    stored = reports.store("cli", "slice", {}, _result())
    with pytest.raises(Conflict):
        reports.update("admin", stored.id, trace="other")
    with pytest.raises(Conflict):
        reports.delete("admin", stored.id)
    assert reports.latest() == stored


def test_a_failed_api_validation_stores_nothing(db_url, services, caplog) -> None:
    from control.services.fidelity.runner import validate_and_store

    validate_and_store(db_url, {"max_requests": 1}, 1)  # refused by FidelityConfig at once
    assert "fidelity validation failed" in caplog.text
    assert services.fidelity_reports.newest_first().total == 0


def _nap(url: str, config: dict, repeats: int) -> None:
    """Stands in for a validation in the runner's worker process."""
    import time

    assert config["max_requests"] == 30 and repeats == 2
    time.sleep(1.0)


def test_the_runner_runs_one_validation_at_a_time() -> None:
    from control.services.fidelity.runner import (
        FidelityRequest,
        FidelityRunner,
        ValidationRunning,
    )

    runner = FidelityRunner("sqlite://", target=_nap)
    runner.start(FidelityRequest(requests=30, repeats=2))
    assert runner.running
    with pytest.raises(ValidationRunning):
        runner.start(FidelityRequest())
    runner.wait(30)
    assert not runner.running and runner.exit_code == 0  # the worker got the settings asked
