"""The What-if page measures the twin's error on request: without a validation runner the
API's refusal is shown; with one, the validation it starts is stored and its error shown."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import streamlit as st

from control.services.fidelity.runner import FidelityRunner
from control.services.fidelity_reports import FidelityReportService
from db.session import make_engine, make_session_factory
from tests.app.conftest import open_page, signed_in

P50_ERROR = 0.0731


def store_a_quick_report(database_url: str, config: Mapping[str, Any], repeats: int) -> None:
    """Stand-in worker body (same arguments as the real one): stores a fixed result at once
    instead of a minute of live replay."""
    factory = make_session_factory(make_engine(database_url))
    FidelityReportService(factory).store(
        "fidelity-runner", "azure_code", dict(config) | {"repeats": repeats},
        {"p50_error": P50_ERROR, "p99_error": 0.2, "slo_attainment_error_pp": 1.0,
         "live": {}, "twin": {}},
    )  # fmt: skip


def _reports(url: str) -> int:
    return FidelityReportService(make_session_factory(make_engine(url))).page(limit=1).total


def test_measure_button_shows_refusal_then_starts_a_stored_validation(
    api, api_db_url, console
) -> None:
    extras = api.server.config.app.state.gateway.extras
    extras.pop("fidelity_runner", None)
    open_page(signed_in(console), "whatif.py")
    before = _reports(api_db_url)
    console.button(key="fid_run").click().run()
    refusals = [e.value for e in console.error]
    assert any("503" in r and "no fidelity runner" in r for r in refusals), refusals
    assert _reports(api_db_url) == before  # refused: nothing stored

    extras["fidelity_runner"] = FidelityRunner(api_db_url, target=store_a_quick_report)
    try:
        console.button(key="fid_run").click().run()
        assert any("Validation started" in s.value for s in console.success)
        deadline = time.monotonic() + 60
        while _reports(api_db_url) == before:
            assert time.monotonic() < deadline, "the validation stored no report"
            time.sleep(0.3)
    finally:
        extras.pop("fidelity_runner", None)
    st.cache_data.clear()
    console.run()
    notes = [c.value for c in console.caption]
    assert any("Twin error (last validation" in n and "p50 ±7%" in n for n in notes), notes
