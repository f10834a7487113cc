"""A canary made to fail is rolled back live, and no client request is lost (issue 24, item 4).

A real gateway over HTTP with one CPU worker process: ``tiny-embed:1`` serves, and version 2 is
registered from a folder whose context is 4 positions, so every real text makes its forward
pass raise (:mod:`tests.support.canary_world`). The operator sends half of version 1's traffic
to version 2 (``PUT /admin/models/tiny-embed/canary``); a client then calls ``/v1/embeddings``
on ``tiny-embed:1`` in bursts. Expected: every call answers 200 (a step that failed on the
canary is retried on the baseline); the core rolls the canary back by itself, once it has the
samples (error rate 100% against 0%) or as soon as the failures open the canary replica's
breaker, whichever comes first, audited as ``system:canary``; the canary's fraction is 0,
its replica is unloaded, later calls never touch it, and ``/metrics`` shows the variants.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from control.core.canary_stats import CanaryConfig
from tests.api.conftest import ADMIN_TOKEN
from tests.support.canary_world import BASELINE, CANARY, canary_gateway

pytestmark = [pytest.mark.slow]

MIN_SAMPLES = 4
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory, _sqlite_template):
    config = CanaryConfig(min_samples=MIN_SAMPLES, window=50)
    with canary_gateway(tmp_path_factory.mktemp("canary"), _sqlite_template, ADMIN_TOKEN,
                        config) as gw:  # fmt: skip
        yield gw


async def _embed_burst(client: httpx.AsyncClient, key: str, n: int, tag: str) -> list[int]:
    auth = {"Authorization": f"Bearer {key}"}
    calls = [client.post("/v1/embeddings", headers=auth, json={
        "model": BASELINE, "input": f"a sentence long enough to need positions {tag} {i}"})
        for i in range(n)]  # fmt: skip
    return [r.status_code for r in await asyncio.gather(*calls)]


async def _scenario(url: str, key: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=90) as client:
        r = await client.put("/admin/models/tiny-embed/canary", headers=ADMIN,
                             json={"version": "2", "fraction": 0.5})  # fmt: skip
        assert r.status_code == 200, r.text
        assert (r.json()["state"], r.json()["canary_key"]) == ("running", CANARY)
        statuses: list[int] = []
        for burst in range(12):
            statuses += await _embed_burst(client, key, 8, f"b{burst}")
            state = (await client.get("/admin/models/tiny-embed/canary", headers=ADMIN)).json()
            if state["state"] == "rolled_back":
                break
        assert statuses and set(statuses) == {200}, statuses  # no request lost
        assert state["state"] == "rolled_back", state
        # judged on its error rate, or at once when its failures opened its replica's breaker
        why = state["reason"]
        assert "error rate" in why or f"breaker of {CANARY}@" in why, state
        assert state["fraction"] == 0.0 and state["canary"]["errors"] >= 1, state
        assert state["canary"]["error_rate"] == 1.0 and state["baseline"]["error_rate"] == 0.0
        # the canary's replica drains and is unloaded
        for _ in range(300):
            snap = (await client.get("/admin/snapshot", headers=ADMIN)).json()
            if not [r for r in snap["replicas"] if r["model_key"] == CANARY]:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"the canary's replica was not unloaded: {snap['replicas']}")
        # traffic is back on the baseline: the canary takes nothing more
        after = await _embed_burst(client, key, 16, "after")
        assert set(after) == {200}
        again = (await client.get("/admin/models/tiny-embed/canary", headers=ADMIN)).json()
        assert again["canary"]["requests"] == state["canary"]["requests"]
        assert again["baseline"]["requests"] >= state["baseline"]["requests"] + 16
        audit = (await client.get("/admin/audit", headers=ADMIN,
                                  params={"entity_type": "model_canary"})).json()  # fmt: skip
        actions = {(a["actor"], a["action"]) for a in audit["items"]}
        assert ("system:canary", "canary:rolled_back") in actions, actions
        assert any(a == "canary_set" for _, a in actions)
        metrics = (await client.get("/metrics")).text
        assert f'legato_canary_rolled_back{{model="{BASELINE}",version="{CANARY}"}} 1.0' in metrics
        assert f'legato_canary_errors_total{{model="{BASELINE}",variant="canary"' in metrics


def test_a_failing_canary_is_rolled_back_and_no_request_is_lost(gateway):
    asyncio.run(_scenario(gateway.url, gateway.tenant_key))
