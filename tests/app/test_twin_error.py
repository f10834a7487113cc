"""The twin's measured error beside its predictions: "not validated yet" (the API's 404 reason)
until a fidelity report is stored, then the errors of the latest validation."""

from __future__ import annotations

import streamlit as st
from streamlit.testing.v1 import AppTest

from control.services.fidelity_reports import FidelityReportService
from db.session import make_engine, make_session_factory
from tests.app.conftest import MAIN, open_page, signed_in
from tests.app.test_headroom_preview import wait_for_twin


def _preview(console: AppTest) -> list[str]:
    """Preview the demo reservation at 20 % and return the notes shown beside the deltas."""
    open_page(signed_in(console), "devices.py")
    console.selectbox(key="hr_pick").select(1).run()
    console.number_input(key="hr_percent").set_value(20.0)
    console.button(key="hr_preview").click().run()
    wait_for_twin(console, "headroom")
    return [n.value for n in [*console.warning, *console.caption]]


def test_predictions_say_not_validated_until_a_report_exists(api, api_db_url, console) -> None:
    st.cache_data.clear()
    reports = FidelityReportService(make_session_factory(make_engine(api_db_url)))
    if reports.page(limit=1).total:  # another test stored one already: only the second half
        notes = []
    else:
        notes = _preview(console)
        assert any(n.startswith("Twin not validated yet (no fidelity report yet") for n in notes)
        table = next(d.value for d in console.dataframe if "twin_error" in d.value.columns)
        assert set(table["twin_error"]) == {"not validated yet"}
    reports.store("test", "azure_code", {"requests": 40},
                  {"p50_error": 0.12, "p99_error": 0.3, "slo_attainment_error_pp": 2.5,
                   "live": {}, "twin": {}})  # fmt: skip
    st.cache_data.clear()
    console = AppTest.from_file(str(MAIN), default_timeout=30)
    notes = _preview(console)
    assert any("Twin error (last validation" in n and "p50 ±12%" in n and "p99 ±30%" in n
               and "SLO ±2.5 pp" in n for n in notes), notes  # fmt: skip
    table = next(d.value for d in console.dataframe if "twin_error" in d.value.columns)
    p99 = table[table["figure"] == "p99 latency (s)"].iloc[0]
    assert p99["twin_error"] == "±30%"
