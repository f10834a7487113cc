"""Plans through the twin in a real browser (Playwright driving Debian's Chromium) against the
live stack as subprocesses (tiny models on one CPU worker, each rollout observed over a few
seconds): on Models and placement, propose a plan from observed demand, replay recent traffic
against it in the twin, see its report beside the placement in force (per tenant, with the
twin's error), roll it out and watch it complete, then the observer's figures, and roll it
back; a canary the API
refuses shows the refusal under its field. The API confirms each step. Screenshots go to
tests/artifacts/console/plans-*.png (git-ignored)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx
import pytest

from tests.app import browser as b

pytestmark = pytest.mark.slow
SHOTS = Path(__file__).resolve().parents[1] / "artifacts" / "console"
#: The demo's generator with packaged GGUF weights: loading it on a shared CPU takes minutes, so
#: it is declared too big for the worker (the planner leaves it unplaced; the twin still knows it).
HEAVY = "smollm2-135m"
WATCH_S = 20  # the observer's window after a completed rollout (room for a slow first run)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    reason = b.browser_missing()
    if reason:
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("browser-plans")
    with b.running_stack(root, live=True, api_args=("--plan-watch-s", str(WATCH_S))) as running:
        with _admin(running) as http:
            models = http.get("/admin/models", params={"limit": 100}).json()["items"]
            heavy = next(m for m in models if m["name"] == HEAVY)
            answer = http.patch(f"/admin/models/{heavy['id']}", json={"memory_mib": 4096})
            assert answer.status_code == 200, answer.text
        yield running


def _admin(stack: b.Stack) -> httpx.Client:
    return httpx.Client(base_url=stack.api_url, headers={"Authorization": f"Bearer {stack.token}"})


def _plan(http: httpx.Client, plan_id: int) -> dict:
    return http.get(f"/admin/placement-plans/{plan_id}").json()


def _until(what: str, check, timeout_s: float = 120.0):  # noqa: ANN001, ANN202
    deadline = time.monotonic() + timeout_s
    while not (found := check()):
        assert time.monotonic() < deadline, what
        time.sleep(0.5)
    return found


def _shot(page, name: str, at) -> None:  # noqa: ANN001
    """Screenshot of the viewport scrolled to ``at`` (Streamlit scrolls inside its own
    container, so a full-page shot would hold only the viewport anyway)."""
    b.settle(page)
    at.evaluate("element => element.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(800)  # let the charts draw
    page.screenshot(path=str(SHOTS / f"plans-{name}.png"))


def _traffic(http: httpx.Client, stack: b.Stack, runs: int) -> None:
    """``runs`` sync runs of the tiny workflow for the first tenant (what the observer sees)."""
    tenant = http.get("/admin/tenants", params={"limit": 1}).json()["items"][0]
    key = http.post(f"/admin/tenants/{tenant['id']}/keys", json={"label": "plans test"}).json()
    headers = {"Authorization": f"Bearer {key['key']}"}
    with httpx.Client(base_url=stack.api_url, headers=headers, timeout=60) as client:
        for _ in range(runs):
            answer = client.post("/v1/workflows/tiny/versions/1/runs",
                                 json={"inputs": {"prompt": "hi"}, "mode": "sync"})  # fmt: skip
            assert answer.status_code == 200, answer.text


def _button(page, text: str):  # noqa: ANN001, ANN202
    """The button whose label ends with ``text`` (an icon's name may come before it)."""
    return page.locator("button", has_text=re.compile(re.escape(text) + "$")).first


def test_propose_replay_and_roll_out_a_plan_on_the_console(stack: b.Stack) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    with _admin(stack) as http, b.chromium_page(height=1800) as page:
        before = {p["id"] for p in http.get("/admin/placement-plans").json()["items"]}
        b.sign_in(page, stack)
        b.open_page(page, "Models and placement")
        b.settle(page)
        _button(page, "Propose a plan from observed demand").click()
        page.get_by_text("Plan proposed from observed demand.").wait_for()
        made = [p for p in http.get("/admin/placement-plans").json()["items"]
                if p["id"] not in before]  # fmt: skip
        assert [p["status"] for p in made] == ["proposed"], made
        plan_id = made[0]["id"]
        b.settle(page)

        _button(page, "Replay recent traffic against this plan").click()
        page.get_by_text("The plan as the twin predicts it").wait_for(timeout=120_000)
        plan = _plan(http, plan_id)
        assert plan["status"] == "simulated" and plan["simulation"]["state"] == "done", plan
        chart = page.locator(".js-plotly-plot", has_text="current vs plan, per tenant")
        chart.wait_for()
        assert "no fidelity report" in page.inner_text("body")  # none stored: it says so
        _shot(page, "1-report_beside_current", page.get_by_text("The twin's gate: plan"))
        assert "current vs plan" in chart.inner_text()

        _button(page, "Roll out").click()
        page.get_by_text(f"Rollout of plan #{plan_id} started.").wait_for()
        _until("the plan is active", lambda: _plan(http, plan_id)["status"] == "active")
        progress = http.get(f"/admin/placement-plans/{plan_id}/rollout").json()
        assert (progress["phase"], progress["state"]) == ("rollout", "completed"), progress
        _traffic(http, stack, 4)  # inside the observer's window
        done = page.get_by_text(f"Plan #{plan_id} after its rollout")
        done.wait_for(timeout=60_000)
        seen = _plan(http, plan_id)["observation"]
        assert seen["state"] == "observed" and seen["observed"]["requests"] >= 1, seen
        page.get_by_text(f"Rollout of plan #{plan_id}: completed").wait_for()
        _shot(page, "2-rolled_out_and_observed", page.get_by_text("Rollout on the live fleet"))

        _button(page, f"Roll back plan #{plan_id}").click()
        _until("the plan is rolled back",
               lambda: _plan(http, plan_id)["status"] == "rolled_back")  # fmt: skip
        page.get_by_text(f"Rollback of plan #{plan_id}: completed").wait_for()
        _shot(page, "3-rolled_back", page.get_by_text("Rollout on the live fleet"))


def test_a_refused_canary_is_shown_under_its_field(stack: b.Stack) -> None:
    with b.chromium_page(height=1800) as page:
        b.sign_in(page, stack)
        b.open_page(page, "Models and placement")
        b.settle(page)
        box = page.get_by_label("Canary of model")
        box.scroll_into_view_if_needed()
        box.click()
        page.keyboard.type("tiny-gen")
        page.keyboard.press("Enter")
        b.settle(page)
        page.get_by_text("No canary has run for this model.").wait_for()  # the running core's
        _button(page, "Set canary").click()
        refusal = page.get_by_text("baseline_version: name the baseline")
        refusal.wait_for()
        _shot(page, "4-canary_refused", page.get_by_text("Canary versions"))
