"""The Request timeline page in a real browser (Playwright driving Debian's Chromium) against
the whole stack as subprocesses with the live runtime: a real run of the ``tiny`` workflow on
the CPU worker, found by its id, shows its Gantt chart, where its time went and the routing
decision. Screenshots go to tests/artifacts/console/timeline-*.png (git-ignored)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.app import browser as b

pytestmark = pytest.mark.slow
SHOTS = Path(__file__).resolve().parents[1] / "artifacts" / "console"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    reason = b.browser_missing()
    if reason:
        pytest.skip(reason)
    with b.running_stack(tmp_path_factory.mktemp("browser-timeline"), live=True) as running:
        yield running


def _a_real_run(stack: b.Stack) -> str:
    """A sync test run of ``tiny`` (a generate step on the worker) for the first tenant."""
    with httpx.Client(base_url=stack.api_url, timeout=60,
                      headers={"Authorization": f"Bearer {stack.token}"}) as admin:  # fmt: skip
        tenant = admin.get("/admin/tenants").json()["items"][0]["id"]
        r = admin.post("/admin/workflows/tiny/versions/1/test-runs",
                       json={"inputs": {"prompt": "hello there"}, "tenant_id": tenant})  # fmt: skip
        assert r.status_code == 200 and r.json()["status"] == "succeeded", r.text
        return r.json()["id"]


def test_a_runs_timeline_shows_its_gantt_chart_and_decisions(stack: b.Stack) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    run_id = _a_real_run(stack)
    with b.chromium_page(height=1400) as page:
        b.sign_in(page, stack)
        b.open_page(page, "Request timeline")
        b.settle(page)
        field = page.get_by_label("Run id")
        field.fill(run_id)
        field.press("Enter")
        b.settle(page)
        page.locator(".js-plotly-plot .main-svg").first.wait_for()
        page.wait_for_timeout(1500)  # let the chart draw
        page.screenshot(path=str(SHOTS / "timeline-run.png"), full_page=True)
        page.locator(".js-plotly-plot").first.screenshot(path=str(SHOTS / "timeline-gantt.png"))
        assert not page.locator('[data-testid="stException"]').count()
        body = page.inner_text("body")
        assert "Where did the time go" in body and "dominated" in body
        assert "gen (attempt 1) on" in body  # the step's row of the Gantt chart
        legend = page.locator(".js-plotly-plot .legendtext").evaluate_all(
            "els => els.map(e => e.textContent)"
        )
        assert {"queue wait", "batch wait", "device time"} <= set(legend), legend
        assert page.locator('[data-testid="stDataFrame"]').count() >= 1  # the decisions

        field.fill("no-such-run")
        field.press("Enter")
        b.settle(page)
        page.get_by_text("No timeline for 'no-such-run'").wait_for()
        page.screenshot(path=str(SHOTS / "timeline-unknown.png"))
