"""The fair-share page's demo burst against a real API with the live runtime (tiny models on
one CPU worker): a rate above the gateway's cap is refused under the rate field and starts
nothing; a burst within bounds starts (the API lists it for the chosen tenant) and the page's
history charts draw the gateway's samples. Without the live demo, the panel says how to turn
bursts on."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from streamlit.testing.v1 import AppTest

from tests.app.conftest import ADMIN_TOKEN, MAIN, open_page, signed_in
from tests.app.stack import Served, build_app, seed, serve_in_thread

pytestmark = pytest.mark.slow  # starts an executor worker process (about 20 s)
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture(scope="module")
def live_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("console-bursts")
    url = f"sqlite:///{root / 'legato.db'}"
    seed(url, live=True)
    served = serve_in_thread(build_app(url, ADMIN_TOKEN, live=True, cache=root / "models"))
    yield served
    served.stop()


def _bursts(api: Served) -> list[dict]:
    return httpx.get(f"{api.url}/admin/demo/bursts", headers=ADMIN, timeout=10).json()


def _page(api: Served, monkeypatch) -> AppTest:
    monkeypatch.setenv("LEGATO_API_URL", api.url)
    monkeypatch.delenv("LEGATO_ADMIN_TOKEN", raising=False)
    return open_page(signed_in(AppTest.from_file(str(MAIN), default_timeout=30)), "fairshare.py")


def test_a_rate_above_the_cap_is_refused_on_its_field(live_api: Served, monkeypatch) -> None:
    at = _page(live_api, monkeypatch)
    at.selectbox(key="burst_tenant").select("globex")
    at.selectbox(key="burst_workflow").select("tiny:1")
    at.number_input(key="burst_rate").set_value(500.0)
    next(b for b in at.button if b.label == "Start burst").click().run()
    assert not at.exception
    assert any(e.value.startswith("rate_per_s:") and "cap" in e.value for e in at.error)
    assert _bursts(live_api) == []


def test_a_burst_starts_from_the_page(live_api: Served, monkeypatch) -> None:
    at = _page(live_api, monkeypatch)
    at.selectbox(key="burst_tenant").select("globex")
    at.selectbox(key="burst_workflow").select("tiny:1")
    at.number_input(key="burst_rate").set_value(4.0)
    at.number_input(key="burst_duration").set_value(3.0)
    next(b for b in at.button if b.label == "Start burst").click().run()
    assert not at.exception
    assert any("Started burst-" in s.value for s in at.success)
    (burst,) = _bursts(live_api)
    assert (burst["tenant"], burst["workflow"], burst["rate_per_s"]) == ("globex", "tiny:1", 4.0)
    at.run()
    table = next(d.value for d in at.dataframe if "accepted" in d.value.columns)
    assert list(table["tenant"]) == ["globex"]
    assert len(at.get("plotly_chart")) == 2


def test_without_the_demo_the_panel_says_how_to_turn_bursts_on(console: AppTest) -> None:
    at = open_page(signed_in(console), "fairshare.py")
    assert any("LEGATO_DEMO_BURSTS=true" in i.value for i in at.info)
