"""Critical-path step order live (issue 26, item 4): real gateway, two real CPU workers, tiny
GPT-2s, the agent-shaped ``fork`` workflow (``tests/support/critical_path_fleet``). The option
set by ``PATCH /admin/policies`` reaches the running core (shown by ``GET``, audited) and changes
the order a burst's steps are served in: the deep branch of each run goes first."""

from __future__ import annotations

import pytest
import pytest_asyncio
import torch

from tests.support.critical_path_fleet import burst, fork_gateway, plan_first_share, run_once

torch.set_num_threads(1)
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]
BURST = 8


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def live(tmp_path_factory, _sqlite_template):
    async with fork_gateway(tmp_path_factory.mktemp("critpath"), _sqlite_template) as clients:
        yield clients


async def test_step_order_set_live_reaches_the_core_and_puts_deep_branches_first(live) -> None:
    client, admin = live
    await run_once(client)  # warm both models
    today = await burst(client, BURST)
    # by ready time, then step key: each run's brief goes before its plan
    assert plan_first_share(today) <= 0.25
    r = await admin.patch("/admin/policies", json={"step_order": "critical_path"})
    assert r.status_code == 200, r.text
    assert r.json()["policies"]["step_order"] == "critical_path"
    shown = (await admin.get("/admin/policies")).json()
    assert shown["policies"]["step_order"] == "critical_path"
    assert "step_order" in shown["live_fields"]
    critical = await burst(client, BURST)
    assert plan_first_share(critical) >= 0.75  # the deep branch first, run after run


async def test_an_unknown_step_order_is_a_422_naming_the_field(live) -> None:
    _client, admin = live
    before = (await admin.get("/admin/policies")).json()["policies"]["step_order"]
    r = await admin.patch("/admin/policies", json={"step_order": "shortest_first"})
    assert r.status_code == 422, r.text
    assert "step_order" in r.text
    assert (await admin.get("/admin/policies")).json()["policies"]["step_order"] == before
