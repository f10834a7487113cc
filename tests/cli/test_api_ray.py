"""`legato api --executor ray`: the gateway over a local Ray head it starts, a real embedding
through it, and nothing of that Ray head left once the command stops; an address that does not
answer is one sentence and exit status 1."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil
import pytest

from control.services import build_services
from control.services.demo_fleet import MINILM_PACKAGE
from db.session import make_engine, make_session_factory
from tests.api.conftest import PEPPER
from tests.support.processes import stop

pytestmark = pytest.mark.ray
pytest.importorskip("ray")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _seed(url: str) -> str:
    """One real CPU device, MiniLM (from its package) and a tenant; that tenant's key."""
    services = build_services(make_session_factory(make_engine(url)), key_pepper=PEPPER)
    node = services.nodes.create("test", name="local")
    services.devices.create("test", name="cpu:0", node_id=node.id, kind="cpu", memory_mib=2048,
                            precisions=["fp32"], is_real=True)  # fmt: skip
    services.models.create("test", name="minilm-embed", version="1", task="embed",
                           weights_source="package", weights_location=MINILM_PACKAGE,
                           memory_mib=128, max_batch_size=8, max_batch_tokens=4096)  # fmt: skip
    tenant = services.tenants.create("test", name="acme", weight=1)
    return services.api_keys.create_key("test", tenant.id, label="ray cli").plaintext


def _ray_processes(marker: str) -> list[psutil.Process]:
    """Processes whose command line names ``marker`` (the Ray temp folder of this test)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(marker in part for part in proc.info["cmdline"] or ()):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def _wait_ready(base: str, proc: subprocess.Popen, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"legato api exited with status {proc.returncode}"
        try:
            if httpx.get(f"{base}/readyz", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"legato api was not ready within {timeout_s:.0f} s")


def _env(root: Path, ray_tmp: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("LEGATO_EXECUTOR", "LEGATO_RAY_ADDRESS", "LEGATO_DATABASE_URL")}  # fmt: skip
    env.update(LEGATO_DATABASE_URL=f"sqlite:///{root / 'legato.db'}",
               LEGATO_VAR_DIR=str(root / "var"), LEGATO_ADMIN_TOKEN="ray-admin",
               LEGATO_KEY_PEPPER=PEPPER.decode(), LEGATO_CPU_WORKER_SLOTS="1",
               RAY_TMPDIR=ray_tmp, RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled",
               HF_HUB_OFFLINE="1")  # fmt: skip
    return env


def test_api_serves_an_embedding_on_a_local_ray_head_and_leaves_no_ray_behind(
    tmp_path, _sqlite_template
):
    shutil.copyfile(_sqlite_template, tmp_path / "legato.db")
    key = _seed(f"sqlite:///{tmp_path / 'legato.db'}")
    ray_tmp = tempfile.mkdtemp(prefix="lr", dir="/tmp")  # short: Ray's socket paths live here
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "control.cli", "api", "--executor", "ray",
           "--host", "127.0.0.1", "--port", str(port), "--drain", "2"]  # fmt: skip
    proc = subprocess.Popen(cmd, env=_env(tmp_path, ray_tmp), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        _wait_ready(base, proc, 240)
        assert _ray_processes(ray_tmp), "no Ray head was started for the API"
        r = httpx.post(f"{base}/v1/embeddings", timeout=60.0,
                       json={"model": "minilm-embed", "input": "a node of a Ray cluster"},
                       headers={"Authorization": f"Bearer {key}"})  # fmt: skip
        assert r.status_code == 200, r.text
        vector = r.json()["data"][0]["embedding"]
        assert len(vector) == 384 and any(abs(v) > 1e-6 for v in vector)
    finally:
        out = stop(proc, 90)
    # uvicorn drains, stops the app (and so the executor), then re-raises the signal it caught
    assert proc.returncode in (0, -signal.SIGTERM), out[-3000:]
    assert "Application shutdown complete" in out, out[-3000:]
    deadline = time.monotonic() + 20
    while _ray_processes(ray_tmp) and time.monotonic() < deadline:
        time.sleep(0.5)
    left = _ray_processes(ray_tmp)
    for p in left:  # never `ray stop`: only what this test's API started, by pid
        p.kill()
    assert not left, [" ".join(p.cmdline())[:120] for p in left]
    shutil.rmtree(ray_tmp, ignore_errors=True)


def test_an_unreachable_ray_address_is_one_sentence_and_exit_1(tmp_path):
    port = _free_port()  # nothing listens there
    for command in ("api", "up", "serve"):
        result = subprocess.run(
            [sys.executable, "-m", "control.cli", command, "--executor", "ray",
             "--ray-address", f"127.0.0.1:{port}"],
            env=_env(tmp_path, str(tmp_path)), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert result.returncode == 1, result.stdout + result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: cannot reach the Ray cluster at")
