"""Critical-path step order live: the agent-shaped ``fork`` workflow (a router tool, a shallow
and a deep branch sharing one tiny GPT-2, the deep one going on to a second tiny GPT-2 that
batches) on a real gateway with two real CPU workers (``tests/support/critical_path_fleet``).

Bursts of ``BURST`` runs sent at once, alternating today's order and critical-path order
(switched on the running core by ``PATCH /admin/policies``, as an operator would; which goes
first alternates between rounds, so drift on a shared machine does not favour one) for
``ROUNDS`` rounds; end-to-end latency (accepted to finished, as the gateway recorded it) pooled
per order. Prints one JSON object with ``critical_path_gain_live`` (pooled p99 today / critical
path) and ``live_round_gains`` (each round's slowest run today / critical path: a noisy
neighbour shows up as one odd round).

    python bench/twin/critical_path_live.py
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

BURST = 16
ROUNDS = 4
ORDERS = ("arrival", "critical_path")


async def _measure(root: Path, template: Path) -> dict:
    from control.services.loadgen import percentile  # noqa: PLC0415
    from tests.support.critical_path_fleet import burst, fork_gateway, run_once  # noqa: PLC0415

    lat: dict[str, list[float]] = {o: [] for o in ORDERS}
    rounds: list[float] = []
    async with fork_gateway(root, template) as (client, admin):
        await run_once(client)  # warm both models
        for i in range(ROUNDS):
            worst: dict[str, float] = {}
            for order in ORDERS if i % 2 == 0 else ORDERS[::-1]:
                r = await admin.patch("/admin/policies", json={"step_order": order})
                assert r.status_code == 200, r.text
                got = [run["latency_s"] for run in await burst(client, BURST)]
                lat[order] += got
                worst[order] = max(got)
            rounds.append(round(worst["arrival"] / worst["critical_path"], 3))
    out: dict = {"live_round_gains": rounds}
    for order in ORDERS:
        out[f"live_p50_ms_{order}"] = round(1000 * (percentile(lat[order], 0.5) or 0.0), 1)
        out[f"live_p99_ms_{order}"] = round(1000 * (percentile(lat[order], 0.99) or 0.0), 1)
    gain = out["live_p99_ms_arrival"] / max(out["live_p99_ms_critical_path"], 1e-9)
    out["critical_path_gain_live"] = round(gain, 3)
    out["live_runs_per_order"] = BURST * ROUNDS
    return out


def measure_live() -> dict:
    import torch  # noqa: PLC0415

    from db import migrate  # noqa: PLC0415

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        template = Path(tmp) / "template.db"
        migrate.upgrade(f"sqlite:///{template}")
        root = Path(tmp) / "world"
        root.mkdir()
        return asyncio.run(_measure(root, template))


if __name__ == "__main__":
    print(json.dumps(measure_live()))
