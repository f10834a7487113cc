"""The console in a real browser (Playwright driving Debian's Chromium) against the whole stack
as subprocesses: sign in, visit every page, edit a DAG node, change a quota, preview an edited
headroom reservation in the twin and save it. Screenshots go to
tests/artifacts/console/ (git-ignored)."""

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
    with b.running_stack(tmp_path_factory.mktemp("browser"), live=True) as running:
        yield running


def _admin(stack: b.Stack) -> httpx.Client:
    return httpx.Client(base_url=stack.api_url, headers={"Authorization": f"Bearer {stack.token}"})


def test_sign_in_visit_every_page_edit_dag_and_quota(stack: b.Stack) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    with b.chromium_page(height=2000) as page:
        b.sign_in(page, stack)
        for i, title in enumerate(b.PAGES):
            b.open_page(page, title)
            b.settle(page)
            plots = page.locator(".js-plotly-plot:visible")
            if plots.count():
                plots.first.locator(".main-svg").first.wait_for()
            page.wait_for_timeout(1500)  # let the last elements and charts draw
            assert not page.locator('[data-testid="stException"]').count(), title
            page.screenshot(path=str(SHOTS / f"{i + 1}-{title.split(',')[0].replace(' ', '_')}.png"),
                            full_page=True)  # fmt: skip

        b.open_page(page, "Workflows")
        b.settle(page)
        page.get_by_role("tab", name="YAML").click()
        b.settle(page)
        area = page.get_by_label("Spec (YAML)")
        text = area.input_value()
        page.screenshot(path=str(SHOTS / "9-workflow_yaml.png"), full_page=True)
        assert "max_tokens: 48" in text, text
        area.fill(text.replace("max_tokens: 48", "max_tokens: 40", 1))
        area.press("Control+Enter")
        b.settle(page)
        page.get_by_role("button", name="Save as version 2").click()
        page.get_by_text("Saved agent version 2").wait_for()
        page.screenshot(path=str(SHOTS / "9-workflow_saved.png"), full_page=True)

        b.open_page(page, "Tenants and quotas")
        page.get_by_role("tab", name="Quotas").click()
        b.settle(page)
        nominal = page.get_by_label("Nominal")
        nominal.fill("54321")
        page.get_by_role("button", name="Save quota").click()
        page.get_by_text("Quota saved.").wait_for()
        page.screenshot(path=str(SHOTS / "10-quota_saved.png"), full_page=True)

        b.open_page(page, "Devices and headroom")
        b.settle(page)
        page.get_by_label("Reservation to edit").click()
        page.get_by_role("option", name="burst-buffer").click()
        b.settle(page)
        percent = page.get_by_label("Reserved (% of each device)")
        percent.fill("30")
        percent.press("Enter")
        b.settle(page)
        page.get_by_role("button", name="Preview in twin").click()
        page.get_by_text("edited burst-buffer:").first.wait_for(timeout=90_000)
        b.settle(page)
        page.screenshot(path=str(SHOTS / "11-headroom_preview.png"), full_page=True)
        page.get_by_role("button", name="Save").click()
        page.get_by_text("Reservation 'burst-buffer' saved.").wait_for()

        b.open_page(page, "What-if")
        b.settle(page)
        page.locator(".js-plotly-plot .main-svg").first.wait_for()
        page.wait_for_timeout(1500)
        page.screenshot(path=str(SHOTS / "12-whatif_results.png"), full_page=True)

    with _admin(stack) as http:
        reservation = http.get("/admin/headroom", params={"name": "burst-buffer"}).json()
        assert reservation["items"][0]["reserved_milli"] == 300
        agent = {w["version"]: w for w in
                 http.get("/admin/workflows", params={"name": "agent"}).json()["items"]}  # fmt: skip
        answer = next(n for n in agent["2"]["spec"]["nodes"] if n["id"] == "answer")
        assert answer["params"]["max_tokens"] == 40
        kept = next(n for n in agent["1"]["spec"]["nodes"] if n["id"] == "answer")
        assert kept["params"]["max_tokens"] == 48
        assert any(q["nominal"] == 54321 for q in http.get("/admin/quotas").json()["items"])
