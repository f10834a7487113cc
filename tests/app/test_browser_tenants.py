"""The Tenants page in a real browser (Playwright driving Debian's Chromium) against the whole
live stack as subprocesses: create a tenant, then a quota for it previewed in the twin and
saved; the API then holds both, and the running core holds the quota without a restart.
Screenshots go to tests/artifacts/console/tenants-*.png (git-ignored)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.app import browser as b

pytestmark = pytest.mark.slow
SHOTS = Path(__file__).resolve().parents[1] / "artifacts" / "console"
NAME = "browser-co"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    reason = b.browser_missing()
    if reason:
        pytest.skip(reason)
    with b.running_stack(tmp_path_factory.mktemp("browser-tenants"), live=True) as running:
        yield running


def _pick(page, label: str, option: str) -> None:  # noqa: ANN001
    """Choose ``option`` in the visible selectbox labelled ``label``."""
    page.locator('[role="tabpanel"]:visible').get_by_label(label, exact=True).click()
    page.get_by_role("option", name=option).click()
    b.settle(page)


def _fill(page, label: str, value: str) -> None:  # noqa: ANN001
    box = page.locator('[role="tabpanel"]:visible').get_by_label(label, exact=True)
    box.fill(value)
    box.press("Enter")
    b.settle(page)


def test_a_tenant_and_its_quota_created_on_the_console_reach_the_api_and_core(stack) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    with b.chromium_page(height=1800) as page:
        b.sign_in(page, stack)
        b.open_page(page, "Tenants and quotas")
        b.settle(page)
        _pick(page, "Tenant to edit", "New tenant")
        _fill(page, "Name", NAME)
        _fill(page, "Fair-share weight", "3")
        page.get_by_role("button", name="Create tenant").click()
        page.get_by_text(f"Tenant '{NAME}' created.").wait_for()
        b.settle(page)
        page.screenshot(path=str(SHOTS / "tenants-1-created.png"), full_page=True)

        page.get_by_role("tab", name="Quotas").click()
        b.settle(page)
        _pick(page, "Quota to edit", "New quota")
        _pick(page, "Tenant", NAME)
        _pick(page, "Kind", "concurrent_requests: requests in flight at once")
        _fill(page, "Nominal", "5")
        page.get_by_role("button", name="Preview in twin").click()
        page.get_by_text(f"quota {NAME} · concurrent_requests:").first.wait_for(timeout=90_000)
        b.settle(page)
        page.screenshot(path=str(SHOTS / "tenants-2-quota_preview.png"), full_page=True)
        page.get_by_role("button", name="Save quota").click()
        page.get_by_text("Quota created.").wait_for()
        b.settle(page)
        page.screenshot(path=str(SHOTS / "tenants-3-quota_saved.png"), full_page=True)

    headers = {"Authorization": f"Bearer {stack.token}"}
    with httpx.Client(base_url=stack.api_url, headers=headers) as http:
        (tenant,) = http.get("/admin/tenants", params={"name": NAME}).json()["items"]
        assert tenant["weight"] == 3
        (quota,) = http.get("/admin/quotas", params={"tenant_id": tenant["id"]}).json()["items"]
        assert (quota["resource"], quota["nominal"]) == ("concurrent_requests", 5)
        live = http.get("/admin/snapshot").json()["tenancy"]["tenants"]
        held = next(t for t in live if t["tenant_id"] == NAME)
        assert [(q["resource"], q["nominal"]) for q in held["quota"]] == [
            ("concurrent_requests", 5)
        ]
