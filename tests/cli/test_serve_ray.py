"""`legato serve --executor ray --ray-address ADDR`: the live driver over a Ray head on this
machine (the flags beat the environment), a real replica loaded on the cluster's actor, and a
clean stop on SIGTERM (drained, executor stopped, exit status 0, no actor left). An address that
does not answer: ``tests/cli/test_api_ray.py``, for ``api``, ``up`` and ``serve`` alike."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time

import psutil
import pytest

from tests.cli.test_api_ray import _env, _free_port, _seed
from tests.support.processes import stop

pytestmark = pytest.mark.ray
ray_cluster_utils = pytest.importorskip("ray.cluster_utils")

#: the proctitle Ray gives the worker process of a device actor
ACTOR_TITLE = "ray::DeviceActor"


def _device_actors(raylet_marker: str) -> list[psutil.Process]:
    """Device-actor processes under the raylet(s) whose command line names ``raylet_marker``
    (only this test's cluster: other Ray clusters may run beside it)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            cmd = " ".join(proc.info["cmdline"] or ())
            if "raylet" in cmd and raylet_marker in cmd:
                found += [c for c in proc.children(recursive=True)
                          if ACTOR_TITLE in " ".join(c.cmdline())]  # fmt: skip
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def _wait_for_line(proc: subprocess.Popen, pattern: str, timeout_s: float) -> tuple[str, str]:
    """Lines of ``proc`` up to the first matching ``pattern``, and that line."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"legato serve ended ({proc.wait()}): " + "".join(seen)[-3000:])
        seen.append(line)
        if re.search(pattern, line):
            return "".join(seen), line
    raise AssertionError(f"no {pattern!r} within {timeout_s:.0f} s: " + "".join(seen)[-3000:])


def test_serve_runs_on_a_ray_head_and_stops_cleanly_on_sigterm(
    tmp_path, _sqlite_template, monkeypatch
):
    shutil.copyfile(_sqlite_template, tmp_path / "legato.db")
    _seed(f"sqlite:///{tmp_path / 'legato.db'}")  # cpu:0 (the driver node's id) and MiniLM
    ray_tmp = tempfile.mkdtemp(prefix="ls", dir="/tmp")  # short: Ray's socket paths live here
    monkeypatch.setenv("RAY_TMPDIR", ray_tmp)
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    head = ray_cluster_utils.Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "object_store_memory": 80 * 1024 * 1024,
                        "include_dashboard": False},
    )  # fmt: skip
    env = _env(tmp_path, ray_tmp)
    # the flags must beat these
    env.update(LEGATO_EXECUTOR="local", LEGATO_RAY_ADDRESS=f"127.0.0.1:{_free_port()}")
    cmd = [sys.executable, "-m", "control.cli", "serve", "--executor", "ray",
           "--ray-address", head.address, "--log-every", "1", "--drain", "2"]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)  # fmt: skip
    try:
        out, line = _wait_for_line(proc, r"serving: \d+ replica", 180)
        ready, devices = map(int, re.findall(r"(\d+) (?:replica|device)", line))
        assert (ready, devices) == (1, 1), out[-3000:]  # MiniLM on the head's one CPU slot
        assert _device_actors(ray_tmp), "no device actor runs on the Ray head"
        more, _ = _wait_for_line(proc, r"runs/s", 30)  # it keeps serving
        out += more
    finally:
        out += stop(proc, 60)
        try:
            deadline = time.monotonic() + 20
            while _device_actors(ray_tmp) and time.monotonic() < deadline:
                time.sleep(0.5)
            left = _device_actors(ray_tmp)
        finally:
            head.shutdown()  # only this test's head: never `ray stop`
            shutil.rmtree(ray_tmp, ignore_errors=True)
    assert proc.returncode == 0, out[-3000:]
    assert "SIGTERM: draining 0 open run(s)" in out, out[-3000:]
    assert out.rstrip().endswith("legato.serve stopped"), out[-3000:]
    assert not left, [" ".join(p.cmdline())[:120] for p in left]
