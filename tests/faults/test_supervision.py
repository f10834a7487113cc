"""No process outlives the one that supervises it, in any stop path (real processes, psutil).

``legato up`` itself (light: ``--no-runtime --no-load``, so its children are the API and, where
asked, the Streamlit console) stopped by SIGTERM, by SIGINT, by SIGINT when the shell that
started it ignored SIGINT, and killed by SIGKILL; the supervisor's bounded drain against a
child that ignores SIGTERM and one that leaves a process behind; an executor host killed
while its worker runs, and a live API stopped by SIGTERM with its worker.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

from control.commands.supervise import Supervisor

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux process tree")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _alive(procs: list[psutil.Process]) -> list[str]:
    """``name (pid)`` of each process still running (a zombie has ended)."""
    found = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                found.append(f"{' '.join(p.cmdline()[:4])} ({p.pid})")
        except psutil.NoSuchProcess:
            pass
    return found


def _wait_gone(procs: list[psutil.Process], timeout_s: float) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while (left := _alive(procs)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def _kill_all(procs: list[psutil.Process]) -> None:
    for p in procs:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass


def _wait_for(path: Path, text: str, proc: subprocess.Popen, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if text in path.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    raise AssertionError(f"no {text!r} within {timeout_s} s:\n{path.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def var_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One var dir for every ``up`` here: the demo is seeded and its keys issued once."""
    return tmp_path_factory.mktemp("up") / "var"


@contextmanager
def legato_up(var_dir: Path, *extra: str, ignore_sigint: bool = False) -> Iterator[tuple]:
    """``legato up --no-runtime --no-load`` once it is up: (its Popen, every descendant, log).
    Whatever is left at the end is killed, so a failing test leaves nothing behind either."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("LEGATO_ADMIN_TOKEN", "LEGATO_KEY_PEPPER", "LEGATO_DATABASE_URL")}  # fmt: skip
    env.update(LEGATO_VAR_DIR=str(var_dir), LEGATO_API_PORT=str(_free_port()),
               LEGATO_CONSOLE_PORT=str(_free_port()), HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))  # fmt: skip
    log = var_dir.parent / f"up-{time.monotonic_ns()}.log"
    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignore_sigint else None
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "control.cli", "up", "--no-runtime", "--no-load",
             "--drain", "10", *extra],
            env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, preexec_fn=ignore,
        )  # fmt: skip
    tree: list[psutil.Process] = []
    try:
        _wait_for(log, "legato is up", proc, 120)
        tree = psutil.Process(proc.pid).children(recursive=True)
        yield proc, tree, log
    finally:
        _kill_all([psutil.Process(proc.pid), *tree] if proc.poll() is None else tree)
        proc.wait(timeout=10)


@pytest.mark.parametrize(
    "signals",
    [(signal.SIGTERM,), (signal.SIGINT,), (signal.SIGINT, signal.SIGINT)],
    ids=["SIGTERM", "SIGINT", "SIGINT-twice"],
)
def test_up_stopped_by_a_signal_stops_api_and_console(var_dir: Path, signals: tuple) -> None:
    """One signal drains; a second one (an impatient Ctrl-C) hurries the stop, never aborts it."""
    with legato_up(var_dir) as (proc, tree, log):
        assert len(tree) >= 2, tree  # the API and the console (Streamlit)
        for sig in signals:
            proc.send_signal(sig)
            time.sleep(0.2)
        code = proc.wait(timeout=25)
        left = _wait_gone(tree, 5)
        assert not left, f"orphaned after {signals}: {left}\n{log.read_text()}"
        assert code == 0, log.read_text()[-2000:]
        assert "stopping" in log.read_text() and "Traceback" not in log.read_text()


def test_up_from_a_shell_that_ignores_sigint_still_stops_on_sigint(var_dir: Path) -> None:
    with legato_up(var_dir, "--no-console", ignore_sigint=True) as (proc, tree, log):
        assert tree
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=25)
        except subprocess.TimeoutExpired:
            pytest.fail(f"legato up ignored SIGINT:\n{log.read_text()[-2000:]}")
        assert not _wait_gone(tree, 5)


def test_up_killed_outright_takes_its_children_with_it(var_dir: Path) -> None:
    with legato_up(var_dir) as (proc, tree, log):
        assert len(tree) >= 2, tree
        (ui,) = [p for p in tree if "streamlit" in " ".join(p.cmdline())]
        ui_env, ui_argv = ui.environ(), ui.cmdline()
        proc.kill()
        proc.wait(timeout=5)
        left = _wait_gone(tree, 20)
        assert not left, f"orphaned after SIGKILL of legato up: {left}\n{log.read_text()}"
        # and the console held no credential: up printed a one-time sign-in link instead
        secret = (var_dir / "admin_token").read_text().strip()
        assert "LEGATO_ADMIN_TOKEN" not in ui_env
        assert secret not in " ".join([*ui_env.values(), *ui_argv])
        assert "/?ticket=" in log.read_text()


STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"
#: A child that starts a process of its own (same group) and then ends at SIGTERM without it.
LEAVER = ("import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
          "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)']);"
          " time.sleep(300)")  # fmt: skip


def test_drain_is_bounded_then_what_is_left_of_each_group_is_killed() -> None:
    supervisor = Supervisor(drain_s=1.5)
    env = dict(os.environ)
    stubborn = supervisor.spawn("stubborn", [sys.executable, "-c", STUBBORN], env)
    leaver = supervisor.spawn("leaver", [sys.executable, "-c", LEAVER], env)
    polite = supervisor.spawn("polite", [sys.executable, "-c", "import time; time.sleep(300)"], env)
    deadline = time.monotonic() + 15
    while not psutil.Process(leaver.proc.pid).children() and time.monotonic() < deadline:
        time.sleep(0.05)
    tree = [psutil.Process(c.proc.pid) for c in (stubborn, leaver, polite)]
    tree += psutil.Process(leaver.proc.pid).children()
    assert len(tree) == 4
    time.sleep(0.5)  # the stubborn child has installed its SIG_IGN
    started = time.monotonic()
    supervisor.stop()
    took = time.monotonic() - started
    assert not _wait_gone(tree, 2)
    assert 1.4 <= took < 4.0, took  # the whole drain bound, not a wait per child, then SIGKILL
    assert polite.proc.returncode == -signal.SIGTERM  # asked first, and it went
    assert stubborn.proc.returncode == -signal.SIGKILL


HOST = """
import sys, time
from control.executor.host import ExecutorConfig, LocalExecutor
from control.executor.protocol import DeviceInfo
ex = LocalExecutor(ExecutorConfig(heartbeat_s=0.5, cache_dir=sys.argv[1], use_cuda=False,
                                  poll_queue=False), [DeviceInfo("cpu:0", "cpu", 0, 512, 0)])
ex.start()
assert ex.wait_ready(120), "the worker did not come up"
print("worker", ex.worker_pid("cpu:0"), flush=True)
time.sleep(300)
"""


def test_executor_workers_end_when_their_host_is_killed(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    host = subprocess.Popen([sys.executable, "-c", HOST, str(tmp_path / "models")], env=env,
                            cwd=ROOT, stdout=subprocess.PIPE, text=True)  # fmt: skip
    tree: list[psutil.Process] = []
    try:
        line = host.stdout.readline()
        assert line.startswith("worker "), line
        tree = psutil.Process(host.pid).children(recursive=True)
        worker = psutil.Process(int(line.split()[1]))
        assert worker in tree
        host.kill()
        host.wait(timeout=5)
        left = _wait_gone(tree, 15)
        assert not left, f"outlived their host: {left}"
    finally:
        _kill_all([*tree, psutil.Process(host.pid)] if host.poll() is None else tree)


def test_live_api_stopped_by_sigterm_stops_its_workers(tmp_path: Path) -> None:
    """The real gateway with the live runtime on one CPU worker (tiny models), as ``legato api``
    serves it: SIGTERM drains it, and its worker stops with it."""
    import httpx

    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "tests.app.stack", "--db", str(tmp_path / "legato.db"),
           "--port", str(port), "--token", "supervision-token-0123456789", "--live"]  # fmt: skip
    host = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    tree: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and host.poll() is None:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        tree = psutil.Process(host.pid).children(recursive=True)
        assert tree, "no worker process under the API"
        host.send_signal(signal.SIGTERM)
        # uvicorn drains, then re-raises the signal it caught: a clean stop ends by SIGTERM
        assert host.wait(timeout=25) in (0, -signal.SIGTERM)
        assert not _wait_gone(tree, 5)
    finally:
        _kill_all([*tree, psutil.Process(host.pid)] if host.poll() is None else tree)
