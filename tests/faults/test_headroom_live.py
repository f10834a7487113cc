"""A headroom reservation an operator sets through the admin API keeps lower-class work off its
device in the live product (issue 22, item 8: "headroom keeps the critical class served").

The overload test's gateway (:func:`tests.faults.overload_server.start`: two CPU workers with
the tiny embedder, ``cpu:1`` reserved for the critical class with ``POST /admin/headroom``),
in this process, without the door's path headroom (the point here is where steps run, not who
is refused). A batch-class tenant sends concurrent calls while the critical tenant calls in
turn; the usage ledger, read through ``/admin/usage``, says which device billed each step.

Expected: the live core took the reservation ("applied"); no batch-class step ran on the
reserved device and every critical step did; after the operator deletes the reservation the
batch class uses that device again.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
import torch

from tests.api.conftest import ADMIN_TOKEN
from tests.faults.overload_server import HEADROOM, start, steps_by_device

torch.set_num_threads(1)
pytestmark = [pytest.mark.slow]

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory, _sqlite_template):
    served, started = start(tmp_path_factory.mktemp("headroom"), _sqlite_template, 30.0, None)
    yield started
    served.stop()


async def _load(url: str, keys: dict[str, str], flooder: str) -> list[int]:
    """8 callers of ``flooder`` (batch class), 6 calls each, while ``vip`` calls 10 times."""
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:

        async def call(key: str, text: str) -> int:
            r = await client.post("/v1/embeddings", json={"model": "tiny-embed", "input": text},
                                  headers={"Authorization": f"Bearer {key}"})  # fmt: skip
            return r.status_code

        async def caller(i: int) -> list[int]:
            return [await call(keys[flooder], f"batch {i} {n} " * 60) for n in range(6)]

        async def critical() -> list[int]:
            return [await call(keys["vip"], f"critical {n}") for n in range(10)]

        done = await asyncio.gather(critical(), *(caller(i) for i in range(8)))
        return [code for codes in done for code in codes]


def test_a_reservation_set_through_the_admin_api_keeps_lower_class_work_off_its_device(gateway):
    url, keys, reserved = gateway["url"], gateway["keys"], gateway["reserved_device"]
    assert gateway["headroom"].startswith("applied"), gateway["headroom"]
    assert set(asyncio.run(_load(url, keys, "f1"))) == {200}
    steps = steps_by_device(url)
    assert steps["f1"] and reserved not in steps["f1"], steps
    assert set(steps["vip"]) == {reserved}, steps  # the critical class goes to its headroom

    with httpx.Client(base_url=url, headers=ADMIN, timeout=30) as admin:
        (found,) = admin.get("/admin/headroom", params={"name": HEADROOM["name"]}).json()["items"]
        gone = admin.delete(f"/admin/headroom/{found['id']}")
        assert gone.status_code == 204, gone.text
        assert gone.headers["X-Legato-Live-Config"].startswith("applied"), gone.headers
    assert set(asyncio.run(_load(url, keys, "f2"))) == {200}
    assert reserved in steps_by_device(url)["f2"]  # no reservation: the batch class may use it
