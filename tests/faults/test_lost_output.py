"""Fault: an intermediate output really lost with its worker, recomputed (issue 22, item 1).

A real gateway (the real app, core, live runtime and a real executor with two CPU workers and
tiny real models). The workflow ``chain`` generates on ``cpu:1`` and embeds the generated text
on ``cpu:0``. The embedding worker is frozen (SIGSTOP, inside its heartbeat limit) with one
embedding call in flight, so the core holds the run's ``embed`` step back (its replica is
busy; one waiting step is not sent ahead) while ``gen`` finishes on ``cpu:1``. Then ``cpu:1``
is SIGKILLed: the ``gen`` output the queued ``embed`` needs is gone before anything fetched it.
The run must still succeed, through a recomputation of ``gen`` under a fresh key (attempt
1001, ``<base>/gen~r1``), with no step billed twice; the core starts that recomputation when it learns the device is
down (``lineage.proactive_recomputes``), before the consumer fails on fetch. With ``max_recomputes=0`` (recovery off,
``LEGATO_TEST_MAX_RECOMPUTES=0``) the same run fails: the test shows the loss is real."""

from __future__ import annotations

import asyncio
import os
import signal
from dataclasses import replace

import pytest
import pytest_asyncio
import torch

from control.api.settings import GatewayConfig
from control.executor.host import ExecutorConfig, LocalExecutor
from control.runtime.live import InitialReplica, RuntimeConfig
from control.wiring.gateway import gateway_app
from control.wiring.live import LiveOptions, serving_core_config
from tests.api.conftest import ADMIN_TOKEN, client_for
from tests.faults.test_worker_kill_burst import DEVICES, REFS, _seed, _until_serving
from tests.support.live_gateway import live_world

torch.set_num_threads(1)
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]
TIMEOUT_S = 60.0
MAX_RECOMPUTES = int(os.environ.get("LEGATO_TEST_MAX_RECOMPUTES", "8"))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def live(tmp_path_factory, _sqlite_template):
    world = live_world(tmp_path_factory.mktemp("lost-output"), _sqlite_template)
    key = _seed(world.services)
    executor = LocalExecutor(
        ExecutorConfig(
            heartbeat_s=1.0, cache_dir=str(world.cache), use_cuda=False, poll_queue=False
        ),  # fmt: skip
        list(DEVICES),
    )
    core = replace(serving_core_config(), max_recomputes=MAX_RECOMPUTES)
    options = LiveOptions(
        model_refs=REFS, runtime=RuntimeConfig(sample_every_s=0.5), core_config=core,
        placement=[InitialReplica("tiny-embed:1", "cpu:0"), InitialReplica("tiny-gen:1", "cpu:1")],
    )  # fmt: skip
    config = GatewayConfig(admin_token=ADMIN_TOKEN, sync_timeout_s=TIMEOUT_S)
    app = gateway_app(world.services, config, executor, options, spec_validator=world.validator)
    inference = app.state.gateway.inference
    await inference.start()
    client = client_for(app, key)
    yield world.services, client, executor, inference.runtime
    await client.aclose()
    await inference.stop()


async def _post(client, path: str, body: dict):  # noqa: ANN001
    return await client.post(path, json=body, timeout=TIMEOUT_S + 10)


def _gen_entries(services, request_id: str | None = None) -> list:  # noqa: ANN001
    return [e for e in services.usage.list()
            if e.node_id == "gen" and request_id in (None, e.request_id)]  # fmt: skip


async def test_output_lost_before_its_consumer_fetched_it_is_recomputed(live):
    services, client, ex, runtime = live
    warm = await _post(client, "/v1/workflows/chain/versions/1/runs", {"inputs": {"prompt": "hi"}})
    assert warm.status_code == 200 and warm.json()["status"] == "succeeded", warm.text
    gen_pid, emb_pid = ex.worker_pid("cpu:1"), ex.worker_pid("cpu:0")
    before = len(_gen_entries(services))
    os.kill(emb_pid, signal.SIGSTOP)
    try:
        # one embedding call in flight on the frozen worker: the embed replica is busy
        held = asyncio.ensure_future(_post(client, "/v1/embeddings",
                                           {"model": "tiny-embed", "input": "held"}))  # fmt: skip
        await asyncio.sleep(0.3)
        run = asyncio.ensure_future(
            _post(client, "/v1/workflows/chain/versions/1/runs", {"inputs": {"prompt": "lost"}})
        )
        for _ in range(30):  # bounded: 3 s, inside the heartbeat limit
            if len(_gen_entries(services)) > before:
                break
            await asyncio.sleep(0.1)
        assert len(_gen_entries(services)) == before + 1, "gen did not finish on cpu:1"
        os.kill(gen_pid, signal.SIGKILL)  # the gen output the queued embed needs is gone
        await asyncio.sleep(0.5)  # the executor has seen the worker die
    finally:
        os.kill(emb_pid, signal.SIGCONT)
    r = await asyncio.wait_for(run, TIMEOUT_S + 20)
    assert (await asyncio.wait_for(held, TIMEOUT_S + 20)).status_code == 200
    body = r.json()
    assert r.status_code == 200 and body["status"] == "succeeded", r.text[:500]
    gens = _gen_entries(services, body["id"])
    # billed once for the lost attempt and once for its recomputation, under a fresh key
    assert sorted(int(e.attempt) for e in gens) == [1, 1001], [(e.attempt, e.node_id) for e in gens]
    entries = services.usage.list()
    keys = [(e.request_id, e.node_id, e.attempt) for e in entries]
    assert len(keys) == len(set(keys)), "a step was billed twice"
    await _until_serving(ex, "cpu:1", gen_pid)
    # the core started the recomputation on the DeviceDown itself, not on a failed fetch
    assert runtime.snapshot().counters.get("lineage.proactive_recomputes", 0) >= 1
