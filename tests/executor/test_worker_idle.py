"""The worker's main thread while idle: it waits on its pipe itself, yet still installs a model
the loader finished and heartbeats name it, though no message comes (a real pipe, threads of
this process)."""

from __future__ import annotations

import multiprocessing
import threading
import time

from control.executor.adapters.tools import NoopAdapter
from control.executor.protocol import DeviceInfo
from control.executor.worker.main import WorkerConfig
from control.executor.worker.process import Worker


def test_a_model_loaded_while_idle_is_installed_without_a_message() -> None:
    ours, theirs = multiprocessing.Pipe()
    worker = Worker(DeviceInfo("cpu:0", "cpu", 0, 1024), theirs, WorkerConfig(heartbeat_s=0.05))
    serving = threading.Thread(target=worker.serve, daemon=True)
    serving.start()
    try:
        assert ours.recv()[0] == "hb"  # serving, idle, waiting on the pipe
        worker.ready.put(("noop", NoopAdapter(tick=False)))  # what the loader does after a load
        deadline = time.monotonic() + 5.0
        named: tuple = ()
        while "noop" not in named and time.monotonic() < deadline:
            if ours.poll(0.1):
                msg = ours.recv()
                named = msg[3] if msg[0] == "hb" else named
        assert "noop" in worker.adapters and "noop" in named
    finally:
        ours.send(("stop",))
        serving.join(5.0)
    assert not serving.is_alive()
