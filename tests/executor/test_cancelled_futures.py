"""A future an executor handed out may be cancelled by its caller (``asyncio.wrap_future`` does
so when the awaiting task is cancelled, as the live runtime's tasks are at stop): the answer that
arrives afterwards is dropped, and the executor's own bookkeeping goes on as if it were taken.
Before, ``set_result`` on the cancelled future raised ``InvalidStateError`` on the executor's
reading thread, half-way through recording a loaded replica or failing the pending loads."""

from __future__ import annotations

import concurrent.futures

from control.executor.futures import fail, settle
from control.executor.host.outputs import OutputDirectory
from control.executor.host.replicas import ReplicaSet
from control.executor.host.transfers import Transfers
from control.executor.protocol import ModelRef

REF = ModelRef("noop", "noop", "tool")


def _replicas() -> tuple[ReplicaSet, list]:
    sent: list = []
    return ReplicaSet(lambda device, msg: sent.append((device, msg)) or True, lambda e: None), sent


def test_settle_and_fail_skip_a_cancelled_future():
    cancelled: concurrent.futures.Future = concurrent.futures.Future()
    assert cancelled.cancel()
    assert settle(cancelled, 1) is False and fail(cancelled, KeyError("x")) is False
    fresh: concurrent.futures.Future = concurrent.futures.Future()
    assert settle(fresh, 1) is True and fresh.result() == 1
    assert settle(fresh, 2) is False and fresh.result() == 1  # the first answer stands


def test_a_load_whose_caller_cancelled_is_still_recorded_when_it_completes():
    replicas, sent = _replicas()
    future = replicas.load("r1", REF, {"cpu:0": 1000}, 10, now=0.0)
    load_id = sent[-1][1][1]
    assert future.cancel()
    replicas.on_loaded(load_id, "r1", 5.0, 10, 1000, now=1.0)  # raised InvalidStateError before
    assert replicas.device_of("r1") == "cpu:0"
    assert replicas.table.used_mib("cpu:0") == 10


def test_stopping_with_a_cancelled_pending_load_fails_the_others():
    replicas, _ = _replicas()
    gone = replicas.load("r1", REF, {"cpu:0": 1000}, 10, now=0.0)
    kept = replicas.load("r2", REF, {"cpu:0": 1000}, 10, now=0.0)
    gone.cancel()
    replicas.fail_loads("executor stopped")  # raised on the cancelled one, leaving r2 unresolved
    report = kept.result(timeout=0)
    assert not report.ok and report.reason == "executor stopped"
    assert replicas.loading_devices() == set()


def test_a_worker_lost_with_a_cancelled_load_and_unload():
    replicas, sent = _replicas()
    first = replicas.load("r1", REF, {"cpu:0": 1000}, 10, now=0.0)
    replicas.on_loaded(sent[-1][1][1], "r1", 5.0, 10, 1000, now=1.0)
    assert first.result(timeout=0).ok
    unload = replicas.unload("r1")
    pending = replicas.load("r2", REF, {"cpu:0": 1000}, 10, now=2.0)
    unload.cancel()
    pending.cancel()
    replicas.forget_device("cpu:0", "crashed")
    assert replicas.loading_devices() == set()


def test_a_fetch_whose_caller_cancelled():
    sent: list = []
    transfers = Transfers(OutputDirectory(100), lambda device, msg: sent.append(msg) or True)
    future = transfers.fetch("cpu:1", "run-1", "embed")
    request_id = sent[-1][1]
    future.cancel()
    transfers.on_fetched(request_id, {"vectors": []}, None)  # raised InvalidStateError before
    other = transfers.fetch("cpu:1", "run-1", "rerank")
    other_cancelled = transfers.fetch("cpu:1", "run-1", "gen")
    other_cancelled.cancel()
    transfers.forget_holder("cpu:1")
    assert isinstance(other.exception(timeout=0), KeyError)
