"""RunHandle streams and the per-run sampling of generate steps."""

from __future__ import annotations

import asyncio

import pytest

from control.core.actions import BatchItem as CoreItem
from control.runtime import mapping
from control.runtime.types import RunHandle, RunResult, StreamDelta


async def _read(handle: RunHandle) -> str:
    return "".join([d.text async for d in handle.stream()])


async def test_two_readers_each_get_the_whole_stream():
    handle = RunHandle("r1", asyncio.get_running_loop())
    early = asyncio.ensure_future(_read(handle))
    await asyncio.sleep(0)
    for i, piece in enumerate(["He", "llo", " world"]):
        handle.push(StreamDelta("r1", "gen", i, piece))
        await asyncio.sleep(0)
    late = asyncio.ensure_future(_read(handle))  # joins after three tokens went out
    await asyncio.sleep(0)
    handle.push(StreamDelta("r1", "gen", 3, "!"))
    handle.resolve(RunResult("r1", "succeeded", {}, None, "done"))
    assert await early == "Hello world!"
    assert await late == "Hello world!"
    assert await _read(handle) == "Hello world!"  # after the end: the whole stream at once


def _item(**params) -> CoreItem:
    return CoreItem(key="r/gen/0", request_id="r", node_id="gen", attempt=0, chunk=None,
                    idempotency_key="k", task="generate", inputs=(), input_tokens=4,
                    max_output_tokens=8, params=params)  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "node", "sampling", "temperature", "top_p"),
    [
        ("generate", {}, {"temperature": 0.7, "top_p": 0.9}, 0.7, 0.9),
        ("generate", {"temperature": 0.2}, {"temperature": 1.0}, 1.0, 1.0),  # the run wins
        ("generate", {"temperature": 0.2}, {"top_p": None}, 0.2, 1.0),  # None: not set
        ("embed", {}, {"temperature": 0.7}, 0.0, 1.0),  # only generate steps sample
    ],
)
def test_run_sampling_overrides_node_params(kind, node, sampling, temperature, top_p):
    params = mapping.gen_params(_item(**node), kind, False, sampling)
    assert (params.temperature, params.top_p) == (temperature, top_p)
