"""The serving process keeps off the cores its CPU workers are pinned to (when cores remain)."""

from __future__ import annotations

import os
import threading

import pytest

from control.executor.host.devices import (
    host_cores,
    keep_host_off_worker_cores,
    pin_process,
    usable_cores,
)
from control.executor.protocol import DeviceInfo

linux_affinity = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(usable_cores()) < 2,
    reason="needs Linux thread affinity and at least two usable cores",
)


def _cpu(index: int, core: int) -> DeviceInfo:
    return DeviceInfo(f"cpu:{index}", "cpu", index, 1024, cpu_core=core)


def test_host_cores_leave_out_cpu_workers_only() -> None:
    cores = usable_cores()
    gpu = DeviceInfo("cuda:0", "cuda", 0, 1024)
    assert host_cores([_cpu(0, cores[0]), gpu]) == set(cores) - {cores[0]}
    assert host_cores([gpu]) == set(cores)


def test_nothing_changes_when_every_core_is_a_worker_slot() -> None:
    before = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    slots = [_cpu(i, c) for i, c in enumerate(usable_cores())]
    assert keep_host_off_worker_cores(slots) is None
    if before is not None:
        assert os.sched_getaffinity(0) == before


@linux_affinity
def test_every_thread_moves_off_the_worker_core_and_back() -> None:
    cores = usable_cores()
    stop = threading.Event()
    started = threading.Event()
    tid: list[int] = []

    def other() -> None:
        tid.append(threading.get_native_id())
        started.set()
        stop.wait(10)

    thread = threading.Thread(target=other, daemon=True)
    thread.start()
    started.wait(5)
    try:
        before = keep_host_off_worker_cores([_cpu(0, cores[0])])
        assert before == set(cores)
        assert cores[0] not in os.sched_getaffinity(0)
        assert cores[0] not in os.sched_getaffinity(tid[0])  # a thread already running moved
    finally:
        pin_process(set(cores))
        stop.set()
        thread.join(5)
    assert os.sched_getaffinity(0) == set(cores)


@linux_affinity
def test_executor_keeps_its_process_off_its_cpu_worker_core_until_stop(model_cache) -> None:
    from tests.executor.conftest import make_executor

    cores = set(usable_cores())
    ex = make_executor(model_cache, cpu_slots=1)
    try:
        worker_core = ex.devices()[0].cpu_core
        assert os.sched_getaffinity(0) == cores - {worker_core}
        assert os.sched_getaffinity(ex.worker_pid("cpu:0")) == {worker_core}
    finally:
        ex.stop()
    assert os.sched_getaffinity(0) == cores
