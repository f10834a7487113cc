"""SIGKILL of the real gateway (live runtime, tiny models on one CPU worker) with accepted
async runs, then a restart on the same database: every run ends succeeded (resumed under its
own id) or failed with a retryable reason that a retry with the same Idempotency-Key turns
into a success; no step is billed twice, a step completed before the kill is not run again
(its output was kept with its bill) and the ledger written before the kill is unchanged."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from tests.app.stack import free_port

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "api-restart-token-0123456789"
#: The stack's gateway without seeding when the database exists already (the restart).
SERVE = (
    "import asyncio, sys, uvicorn; from pathlib import Path; "
    "from tests.app.stack import build_app, seed; db = Path(sys.argv[1]); "
    "url = f'sqlite:///{db.resolve()}'; fresh = not db.exists(); "
    "seed(url, 0, True) if fresh else None; "
    "app = build_app(url, sys.argv[3], True, db.parent / 'models'); "
    "asyncio.run(uvicorn.Server(uvicorn.Config(app, host='127.0.0.1', port=int(sys.argv[2]), "
    "log_level='warning')).serve())"
)


def _start(db: Path, port: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-c", SERVE, str(db), str(port), TOKEN], env=env,
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    pytest.fail("the gateway did not become ready within 60 s")


def _kill_tree(proc: subprocess.Popen) -> None:
    try:
        tree = [*psutil.Process(proc.pid).children(recursive=True), psutil.Process(proc.pid)]
    except psutil.NoSuchProcess:
        return
    for p in tree:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(tree, timeout=10)


def _tenant_key(http: httpx.Client) -> str:
    admin = {"Authorization": f"Bearer {TOKEN}"}
    tid = http.get("/admin/tenants", params={"name": "acme"}, headers=admin).json()["items"][0]
    made = http.post(f"/admin/tenants/{tid['id']}/keys", json={"label": "t"}, headers=admin)
    return made.json()["key"]


def _submit(http: httpx.Client, auth: dict, i: int) -> httpx.Response:
    return http.post("/v1/workflows/tiny/versions/1/runs",
                     json={"inputs": {"prompt": f"run {i}"}, "mode": "async"},
                     headers={**auth, "Idempotency-Key": f"restart-{i}"})  # fmt: skip


def _settled(http: httpx.Client, auth: dict, run_id: str, timeout_s: float = 40) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run = http.get(f"/v1/runs/{run_id}", headers=auth).json()
        if run["status"] not in ("queued", "running"):
            return run
        time.sleep(0.2)
    pytest.fail(f"run {run_id} did not end within {timeout_s} s")


def test_accepted_runs_survive_a_sigkill_of_the_gateway(tmp_path: Path) -> None:
    db, port = tmp_path / "legato.db", free_port()
    base = f"http://127.0.0.1:{port}"
    proc = _start(db, port)
    try:
        with httpx.Client(base_url=base, timeout=30) as http:
            auth = {"Authorization": f"Bearer {_tenant_key(http)}"}
            accepted = [_submit(http, auth, i) for i in range(8)]
        assert all(r.status_code == 202 for r in accepted), [r.text for r in accepted]
        os.kill(proc.pid, signal.SIGKILL)  # accepted, most still queued or running
        _kill_tree(proc)
        with sqlite3.connect(db) as conn:
            left_open = conn.execute("SELECT COUNT(*) FROM requests WHERE status IN "
                                     "('queued', 'running')").fetchone()[0]  # fmt: skip
            ledger_before = set(conn.execute("SELECT * FROM usage_entries").fetchall())
            kept = {r for (r,) in conn.execute("SELECT request_id FROM run_steps")}
        assert left_open > 0, "every run ended before the kill: nothing was left to resume"
        proc = _start(db, port)
        with httpx.Client(base_url=base, timeout=30) as http:
            for i, first in enumerate(accepted):
                run = _settled(http, auth, first.json()["id"])
                if run["status"] == "failed":
                    assert run["error"].startswith("retryable:"), run
                    retry = _submit(http, auth, i)
                    assert retry.status_code == 202, retry.text
                    run = _settled(http, auth, retry.json()["id"])
                assert run["status"] == "succeeded", run
                if run["id"] in kept:  # its one step was done before the kill: not run again
                    assert run["usage"]["input_tokens"] == 0, run
                    assert run["outputs"], run
    finally:
        _kill_tree(proc)
    with sqlite3.connect(db) as conn:
        twice = conn.execute("SELECT request_id, node_id, attempt, COUNT(*) FROM usage_entries "
                             "GROUP BY request_id, node_id, attempt HAVING COUNT(*) > 1").fetchall()  # fmt: skip
        billed = conn.execute("SELECT request_id, node_id FROM usage_entries").fetchall()
        ledger_after = set(conn.execute("SELECT * FROM usage_entries").fetchall())
    assert twice == []
    assert ledger_before <= ledger_after  # every entry written before the kill, unchanged
    assert len(billed) == len(set(billed)), "a step was billed twice"
