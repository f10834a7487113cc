"""Console sign-in in a real browser (Playwright, Debian's Chromium) against the stack as
subprocesses, with the admin credential lying in the console's var dir as ``legato up`` leaves
it: a browser that presents nothing sees only the sign-in form, on any page's URL; a one-time
link signs a browser in once, and a second browser with the same link gets the form; sign-out
returns to the form."""

from __future__ import annotations

import time

import pytest

from app import links
from tests.app import browser as b

pytestmark = pytest.mark.slow
TENANTS = ("acme", "globex", "initech")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    reason = b.browser_missing()
    if reason:
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("browser-sign-in")
    (root / "var").mkdir()
    (root / "var" / "admin_token").write_text(b.TOKEN + "\n")  # what the old console read
    with b.running_stack(root, live=False) as running:
        yield running


def _at_the_form(page) -> str:  # noqa: ANN001
    page.get_by_label("Admin credential").wait_for()
    b.settle(page)
    assert not page.locator('[data-testid="stSidebarNav"]').count()
    body = page.inner_text("body")
    assert not [t for t in TENANTS if t in body], body
    assert "Signed in" not in body
    return body


def test_browser_without_the_credential_sees_only_the_sign_in_form(stack: b.Stack) -> None:
    with b.chromium_page() as page:
        page.goto(stack.console_url)
        _at_the_form(page)
        for path in ("tenants", "usage"):
            page.goto(f"{stack.console_url}/{path}")
            _at_the_form(page)


def test_one_time_link_signs_in_once_and_sign_out_returns_to_the_form(stack: b.Stack) -> None:
    token = links.issue(stack.root / "var", stack.token, time.time())
    with b.chromium_page() as page:
        page.goto(links.link(stack.console_url, token))
        page.get_by_role("heading", name="Overview").wait_for()
        b.settle(page)
        assert "ticket=" not in page.url
        b.open_page(page, "Tenants and quotas")  # signed in: the pages are there
        b.settle(page)
        page.get_by_role("button", name="Sign out").click()
        _at_the_form(page)
        other = page.context.browser.new_page()
        other.goto(links.link(stack.console_url, token))
        other.get_by_text("already used or has expired").wait_for()
        _at_the_form(other)
        b.sign_in(other, stack)  # the credential itself still signs in
