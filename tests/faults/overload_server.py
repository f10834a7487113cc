"""The overload test's gateway in a process of its own (``python -m tests.faults.overload_server
ROOT TEMPLATE TIMEOUT_S [lent]``): the load generator must not share the gateway's GIL and event loop,
as no real client does. Seeds the fleet (two CPU devices with the tiny embedder), serves on a free loopback port, sets
the critical tenant's headroom reservation through the admin API (as an operator does) and
prints one JSON line ``{"url", "keys", "headroom" (the live core's answer), "reserved_device"}``;
serves until stdin closes."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import torch

from control.api.settings import GatewayConfig
from control.executor.protocol import DeviceInfo, ModelRef
from control.runtime.live import InitialReplica
from tests.api.conftest import ADMIN_TOKEN
from tests.app.stack import serve_in_thread
from tests.support.live_gateway import live_app, live_world, seed_embed_fleet

REFS = {"tiny-embed:1": ModelRef("tiny-embed:1", "embed", "tiny", "bert")}
FLOODERS = ("f1", "f2", "f3")
#: The door's headroom on the gateway's path for the critical class (s): lower classes are
#: refused while the path holds more than this (a critical call waits behind at most that).
LOWER_CLASS_PATH_S = 0.005
DEVICES = ("cpu:0", "cpu:1")  # one worker each; cpu:1 is the critical class's headroom


#: The critical tenant's headroom, as an operator sets it (``POST /admin/headroom``): half of
#: the one-slot pool of ``cpu:1`` (at most half a pool may be reserved), i.e. that whole
#: device, held for the critical class and lent to no one.
HEADROOM = {"name": "critical-headroom", "reserved_milli": 500,
            "allowed_classes": ["critical"], "borrowable": False}  # fmt: skip


def _seed(services) -> tuple[dict[str, str], int]:  # noqa: ANN001
    """Two CPU devices with the tiny embedder, the tenants and their keys; returns the keys
    and the id of the device the headroom reservation will cover."""
    seed_embed_fleet(services, max_batch_size=1, max_batch_tokens=8192)
    (node,) = services.nodes.list(name="local")
    reserved = services.devices.create("test", name="cpu:1", node_id=node.id, kind="cpu",
                                       memory_mib=2048, precisions=["fp32"], is_real=True)  # fmt: skip
    keys = {}
    for name, cls in [("vip", "critical"), *((f, "batch") for f in FLOODERS)]:
        tenant = services.tenants.create("test", name=name, weight=1, priority_class=cls)
        keys[name] = services.api_keys.create_key("test", tenant.id).plaintext
    return keys, reserved.id


def _reserve(url: str, device_id: int, headroom: dict = HEADROOM) -> str:
    """The headroom reservation through the admin API of the running gateway; returns what
    the live core said of it (``X-Legato-Live-Config``)."""
    import httpx

    body = {**headroom, "selector": {"device_ids": [device_id]}}
    r = httpx.post(f"{url}/admin/headroom", json=body, timeout=30,
                   headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})  # fmt: skip
    r.raise_for_status()
    return r.headers.get("X-Legato-Live-Config", "")


async def _flood(url: str, key: str, seconds: float, callers: int) -> list[list]:
    """``callers`` closed-loop callers of one tenant for ``seconds``: per answer its status,
    its Retry-After header and whether its JSON detail says "not admitted"."""
    import asyncio
    import time

    import httpx

    out: list[list] = []
    print("flooding", flush=True)  # imports done: the test starts its window now
    until = time.perf_counter() + seconds

    async def one(client: httpx.AsyncClient) -> None:
        n = 0
        while time.perf_counter() < until:
            r = await client.post("/v1/embeddings", headers={"Authorization": f"Bearer {key}"},
                                  json={"model": "tiny-embed", "input": f"flood text {n} " * 120})  # fmt: skip
            n += 1
            detail = r.json().get("detail", "") if r.status_code == 429 else ""
            out.append([r.status_code, r.headers.get("Retry-After"), "not admitted" in detail])

    limits = httpx.Limits(max_connections=callers + 8)
    async with httpx.AsyncClient(base_url=url, timeout=30, limits=limits) as client:
        await asyncio.gather(*(one(client) for _ in range(callers)))
    return out


def flood_main() -> None:
    """``flood URL KEY SECONDS CALLERS``: one flooding tenant; prints a line when it starts,
    then its answers as JSON."""
    import asyncio

    url, key, seconds, callers = sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
    # The load generator stands for clients on other machines: on the test's few shared cores
    # it must not take the CPU the gateway, its worker and the measured caller need.
    os.nice(19)
    print(json.dumps(asyncio.run(_flood(url, key, seconds, callers))), flush=True)


def steps_by_device(url: str) -> dict[str, dict[int | None, int]]:
    """Tenant name -> device id -> billed steps, from the whole usage ledger (admin API)."""
    import httpx

    out: dict[str, dict[int | None, int]] = {}
    offset = 0
    with httpx.Client(
        base_url=url, timeout=30, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
    ) as c:
        while True:
            page = c.get("/admin/usage", params={"limit": 1000, "offset": offset}).json()
            for item in page["items"]:
                per = out.setdefault(item["tenant_name"], {})
                per[item["device_id"]] = per.get(item["device_id"], 0) + 1
            offset += len(page["items"])
            if not page["items"] or offset >= page["total"]:
                return out


def start(root: Path, template: Path, timeout_s: float,
          lower_class_path_s: float | None, headroom: dict = HEADROOM) -> tuple[Any, dict]:  # fmt: skip
    """Seed, serve and reserve (see the module's docstring): (the served app, what ``main``
    prints). ``lower_class_path_s``: the door's headroom for the critical class; ``headroom``:
    the reservation's body (``HEADROOM``: lent to no one)."""
    world = live_world(root, template, archs=("bert",))
    keys, reserved = _seed(world.services)
    config = GatewayConfig(admin_token=ADMIN_TOKEN, sync_timeout_s=timeout_s,
                           capacity_lower_class_path_s=lower_class_path_s)  # fmt: skip
    app = live_app(world, REFS, config, memory_mib=2048,
                   placement=[InitialReplica("tiny-embed:1", d) for d in DEVICES],
                   devices=[DeviceInfo(d, "cpu", i, 2048, cpu_core=i)
                            for i, d in enumerate(DEVICES)],
                   start_with_app=True)  # fmt: skip
    served = serve_in_thread(app)
    live = _reserve(served.url, reserved, headroom)
    return served, {"url": served.url, "keys": keys, "headroom": live,
                    "reserved_device": reserved}  # fmt: skip


def main() -> None:
    if sys.argv[1] == "flood":
        flood_main()
        return
    root, template, timeout_s = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
    torch.set_num_threads(1)
    if sys.argv[4:] == ["lent"]:  # the reservation lent preemptibly, no door headroom
        lent = {**HEADROOM, "borrowable": True}
        served, started = start(root, template, timeout_s, None, lent)
    else:
        served, started = start(root, template, timeout_s, LOWER_CLASS_PATH_S)
    print(json.dumps(started), flush=True)
    threading.Thread(target=sys.stdin.read, daemon=True).start()
    sys.stdin.read()
    served.stop()


if __name__ == "__main__":
    main()
