"""The Request timeline page in AppTest against the real API (no live runtime: a run whose row
keeps a timeline is stored first): a run found by its id shows the Gantt chart, where its time
went and its decisions with the candidates' scores; it is in the slow-run picker; an unknown id
is refused next to the field."""

from __future__ import annotations

import streamlit as st

from control.services import build_services
from db.session import make_engine, make_session_factory
from tests.app.conftest import open_page, signed_in
from tests.support.timelines import finished_run


def _stored_run(api_db_url: str) -> str:
    services = build_services(make_session_factory(make_engine(api_db_url)))
    tenant = services.tenants.list(limit=1)[0]
    flow = next(w for w in services.workflows.list() if w.status == "active")
    return finished_run(services, tenant.id, flow.name, flow.version)


def test_a_run_found_by_id_shows_its_gantt_chart_and_decisions(api, api_db_url, console) -> None:
    run_id = _stored_run(api_db_url)
    st.cache_data.clear()
    open_page(signed_in(console), "timeline.py")
    assert console.title[0].value == "Request timeline"
    assert any(run_id in o for o in console.selectbox(key="timeline_slow").options)
    console.text_input(key="timeline_run_id").input(run_id).run()
    assert not console.exception and not console.error
    assert any(i.value.startswith("Where did the time go: device time dominated")
               for i in console.info)  # fmt: skip
    chart = console.get("plotly_chart")[0]
    assert '"device time"' in chart.proto.spec and '"batch wait"' in chart.proto.spec
    decisions = next(d.value for d in console.dataframe if "candidates" in d.value.columns)
    assert list(decisions["kind"]) == ["admission", "route"]
    assert "e:1@cpu:1/r1: 5400 us" in decisions["candidates"].iloc[1]


def test_an_unknown_run_id_is_refused_next_to_the_field(api, console) -> None:
    open_page(signed_in(console), "timeline.py")
    console.text_input(key="timeline_run_id").input("no-such-run").run()
    assert not console.exception
    errors = [e.value for e in console.error]
    assert any("No timeline for 'no-such-run'" in e and "not found" in e for e in errors), errors
    assert not console.get("plotly_chart")


def test_picking_a_slow_run_opens_its_timeline(api, api_db_url, console) -> None:
    run_id = _stored_run(api_db_url)
    st.cache_data.clear()
    open_page(signed_in(console), "timeline.py")
    console.selectbox(key="timeline_slow").select(run_id).run()
    assert not console.exception and not console.error
    assert console.get("metric")[1].value == "60.0 ms"
