"""A finished run's outputs: at hand at once when its workers returned them with the results
(the run settles in the same loop turn), otherwise fetched once and awaited."""

from __future__ import annotations

import asyncio
import concurrent.futures

import pytest

from control.core.types import InputRef
from control.runtime import mapping
from control.runtime.outputs import OutputFetch
from control.runtime.types import RunHandle, RunResult


class Holder:
    """An executor that holds step outputs; ``returned`` ones came back with their results."""

    def __init__(self, returned: dict, held: dict) -> None:
        self.returned, self.held = returned, held
        self.sent: list[tuple[str, str]] = []
        self.pending: dict[tuple[str, str], concurrent.futures.Future] = {}

    def fetch_output(self, run_id: str, node_id: str) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        if (run_id, node_id) in self.returned:
            future.set_result(self.returned[(run_id, node_id)])
        else:
            self.sent.append((run_id, node_id))
            self.pending[(run_id, node_id)] = future
        return future

    def answer(self) -> None:
        for key, future in self.pending.items():
            future.set_result(self.held[key])


def _stores() -> mapping.Stores:
    return mapping.Stores(
        payloads={"r": {"query": "q?"}}, host_outputs={}, exec_held={("r", "embed")},
        kind_of=lambda run, node: "embed",
    )  # fmt: skip


OUTPUTS = {
    "vector": (InputRef("r", "embed", "embedding", "cpu:0", "e@cpu:0"),),
    "echo": (InputRef("r", "input", "query", None, None),),
}


def test_outputs_returned_with_the_results_are_ready_without_a_fetch() -> None:
    ex = Holder({("r", "embed"): {"vector": [0.5, 0.25]}}, {})
    fetch = OutputFetch(OUTPUTS, _stores(), ex)
    assert fetch.ready and ex.sent == []
    assert fetch.values() == {"vector": [0.5, 0.25], "echo": "q?"}


class Returning(Holder):
    """A Holder that also says which outputs it has at hand (as ``LocalExecutor`` does)."""

    def __init__(self, returned: dict, held: dict) -> None:
        super().__init__(returned, held)
        self.futures = 0

    def returned_output(self, run_id: str, node_id: str) -> dict | None:
        return self.returned.get((run_id, node_id))

    def fetch_output(self, run_id: str, node_id: str) -> concurrent.futures.Future:
        self.futures += 1
        return super().fetch_output(run_id, node_id)


def test_an_output_at_hand_is_taken_without_a_future_and_a_held_one_still_fetched() -> None:
    ex = Returning({("r", "embed"): {"vector": [0.5]}}, {})
    fetch = OutputFetch(OUTPUTS, _stores(), ex)
    assert fetch.ready and ex.futures == 0
    assert fetch.values() == {"vector": [0.5], "echo": "q?"}
    ex = Returning({}, {("r", "embed"): {"vector": [1.0]}})
    fetch = OutputFetch(OUTPUTS, _stores(), ex)
    assert not fetch.ready and ex.sent == [("r", "embed")]
    ex.answer()
    assert fetch.ready and fetch.values()["vector"] == [1.0]


async def test_a_held_output_is_fetched_once_and_awaited() -> None:
    ex = Holder({}, {("r", "embed"): {"vector": [1.0]}})
    fetch = OutputFetch(OUTPUTS, _stores(), ex)
    assert not fetch.ready and ex.sent == [("r", "embed")]
    asyncio.get_running_loop().call_later(0.01, ex.answer)
    assert await fetch.wait() == {"vector": [1.0], "echo": "q?"}
    assert ex.sent == [("r", "embed")]  # waiting sent nothing more


def test_a_missing_request_input_is_refused_at_once() -> None:
    with pytest.raises(mapping.InputUnavailable, match="nope"):
        OutputFetch({"x": (InputRef("r", "input", "nope", None, None),)}, _stores(), Holder({}, {}))


async def test_end_callbacks_run_as_the_run_resolves_and_one_failure_spares_the_rest() -> None:
    handle = RunHandle("r", asyncio.get_running_loop())
    seen: list[str] = []
    handle.add_done_callback(lambda res: seen.append(f"a:{res.status}"))
    handle.add_done_callback(lambda res: 1 / 0)
    handle.add_done_callback(lambda res: seen.append(f"b:{res.status}"))
    result = RunResult("r", "succeeded", {}, None, None, ())
    handle.resolve(result)
    assert seen == ["a:succeeded", "b:succeeded"]  # before any loop turn
    handle.add_done_callback(lambda res: seen.append("late"))
    assert seen[-1] != "late"
    await asyncio.sleep(0)
    assert seen[-1] == "late" and (await handle.result()) is result
