"""The headroom editor previews an edited reservation in the twin (a what-if through the
admin API, run by the real twin in a worker process) before it is saved."""

from __future__ import annotations

import time

from streamlit.testing.v1 import AppTest

from tests.app.conftest import open_page, signed_in
from tests.app.test_pages import _rows

FIGURES = {"p99 latency (s)", "SLO attainment", "throughput (req/s)", "headroom in use"}


def wait_for_twin(at: AppTest, form: str, timeout_s: float = 90.0) -> None:
    """Rerun the page (as the fragment's timer would) until the followed run has ended."""
    deadline = time.monotonic() + timeout_s
    while f"twin_done:{form}" not in at.session_state:
        assert time.monotonic() < deadline, "the twin run did not end in time"
        time.sleep(0.5)
        at.run()
        assert not at.exception, [e.message for e in at.exception]


def _pick(api, console: AppTest, name: str) -> dict:  # noqa: ANN001
    stored = _rows(api, "/admin/headroom", name=name)[0]
    console.selectbox(key="hr_pick").select(stored["id"]).run()
    assert console.text_input(key="hr_name").value == name  # the fields show the stored values
    return stored


def test_edited_reservation_is_previewed_in_the_twin_then_saved(api, console) -> None:
    open_page(signed_in(console), "devices.py")
    stored = _pick(api, console, "burst-buffer")
    assert console.number_input(key="hr_percent").value == stored["reserved_milli"] / 10
    console.number_input(key="hr_percent").set_value(30.0)
    runs_before = len(_rows(api, "/admin/whatif"))
    console.button(key="hr_preview").click().run()
    assert not console.error, [e.value for e in console.error]
    wait_for_twin(console, "headroom")

    run = _rows(api, "/admin/whatif")[-1]
    assert len(_rows(api, "/admin/whatif")) == runs_before + 1 and run["status"] == "succeeded"
    (edited,) = run["scenario"]["variants"].values()
    assert [h["reserved_milli"] for h in edited["headroom"]] == [300]  # the edit, not the store
    base = run["scenario"]["baseline"]["headroom"]
    assert [h["reserved_milli"] for h in base] == [stored["reserved_milli"]]
    table = next(d.value for d in console.dataframe if "twin_error" in d.value.columns)
    assert FIGURES <= set(table["figure"])
    assert table["ci95"].notna().all() and (table["ci95"] >= 0).all()
    p99 = table[table["figure"] == "p99 latency (s)"].iloc[0]
    assert p99["twin_error"] in ("not validated yet",) or p99["twin_error"].startswith("±")
    assert any("not validated yet" in w.value or "Twin error" in w.value
               for w in [*console.warning, *console.caption])  # fmt: skip
    # previewing changed nothing; Save applies the previewed reservation
    assert _rows(api, "/admin/headroom", name="burst-buffer")[0]["reserved_milli"] == 150
    console.button(key="hr_save").click().run()
    saved = _rows(api, "/admin/headroom", name="burst-buffer")[0]
    assert saved["reserved_milli"] == 300 and saved["selector"] == stored["selector"]
    console.selectbox(key="hr_pick").select(stored["id"]).run()
    console.number_input(key="hr_percent").set_value(15.0)
    console.button(key="hr_save").click().run()  # put the demo value back for other tests
    assert _rows(api, "/admin/headroom", name="burst-buffer")[0]["reserved_milli"] == 150


def test_preview_of_a_bad_reservation_is_refused_next_to_the_field(api, console) -> None:
    open_page(signed_in(console), "devices.py")
    _pick(api, console, "burst-buffer")
    console.number_input(key="hr_percent").set_value(75.0)
    runs_before = len(_rows(api, "/admin/whatif"))
    console.button(key="hr_preview").click().run()
    messages = [e.value for e in console.error]
    assert any(m.startswith("reserved_milli:") and "500" in m for m in messages), messages
    assert len(_rows(api, "/admin/whatif")) == runs_before  # no run was stored
    assert _rows(api, "/admin/headroom", name="burst-buffer")[0]["reserved_milli"] == 150
