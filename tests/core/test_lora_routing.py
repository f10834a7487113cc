"""LoRA adapters in the core (issue 27, item 4): the core mirrors each replica's adapter LRU
(updated on dispatch, least recently used evicted), routing prefers a replica holding the
step's adapter (a replica lacking it pays the adapter's load time), a batch never holds more
distinct adapters than the replica's slots, the adapter applies only to generate steps of its
base model, and the dispatched batch carries the load time it pays."""

from __future__ import annotations

from dataclasses import replace

from control.core.actions import Dispatch
from control.core.batching.size_delay import SizeDelayConfig
from control.core.context import CoreConfig
from control.core.routing.adapter_lru import AdapterLru
from control.core.types import BatchResult, Request, StepResult
from tests.core.fakes import FcfsTenancy
from tests.support.builders import EMBED, LLM, devices, make_core, single

SLOTS = replace(LLM, max_adapters=2, adapter_load_s=0.3, max_batch_size=8)
NO_DELAY = CoreConfig(batching_config=SizeDelayConfig(max_queue_delay_s=0.0))
WF = f"only-{SLOTS.name}"


def core_for(n_replicas: int = 1):  # noqa: ANN201
    devs = devices(n_replicas)
    return make_core(
        FcfsTenancy(), models=[SLOTS, EMBED], devs=devs, workflows=[single(SLOTS), single(EMBED)],
        replicas=[(SLOTS.key, d.device_id) for d in devs], config=NO_DELAY,
    )  # fmt: skip


def req(i: int, adapter: str = "", load_s: float = 0.0, wf: str = WF) -> Request:
    return Request(f"q{i}", "t1", wf, prompt_tokens=32, max_output_tokens=4, adapter=adapter,
                   adapter_model=SLOTS.key if adapter else "", adapter_load_s=load_s)  # fmt: skip


def finish(core, d: Dispatch, now: float) -> None:  # noqa: ANN001
    items = tuple(StepResult(i.key, True, i.input_tokens, i.max_output_tokens) for i in d.items)
    core.complete(BatchResult(d.batch_id, d.predicted_us, items), now)


def run_one(core, r: Request, now: float) -> Dispatch:  # noqa: ANN001
    core.submit(r, now)
    (d,) = core.step(now).of_type(Dispatch)
    finish(core, d, now + 0.001)
    core.step(now + 0.001)
    return d


def test_the_mirror_evicts_the_least_recently_used_outside_the_batch() -> None:
    lru = AdapterLru(2)
    assert lru.use(["a", "", "b"]) == (["a", "b"], [])
    assert lru.use(["a"]) == ([], [])  # a is now the most recent
    assert lru.use(["c"]) == (["c"], ["b"]) and lru.held() == ("a", "c")
    assert lru.use(["d", "e", "a"]) == (["d", "e"], ["c"])  # over capacity while all in use
    assert lru.held() == ("d", "e", "a")
    assert lru.use([""]) == ([], []) and lru.use(["a"]) == ([], ["d"])  # back within slots


def test_a_batch_pays_the_load_of_adapters_the_replica_lacks_and_the_mirror_follows() -> None:
    core = core_for()
    first = run_one(core, req(0, "lora-1"), 0.0)
    assert first.items[0].adapter == "lora-1" and first.adapter_load_us == 300_000
    again = run_one(core, req(1, "lora-1"), 1.0)
    assert again.adapter_load_us == 0 and again.predicted_us == first.predicted_us - 300_000
    measured = run_one(core, req(2, "lora-2", load_s=0.05), 2.0)  # the row's load time
    assert measured.adapter_load_us == 50_000
    run_one(core, req(3, "lora-3"), 3.0)  # evicts lora-1, the least recently used
    (replica,) = core.snapshot().replicas
    assert replica.adapters == ("lora-2", "lora-3")
    assert run_one(core, req(4, "lora-1"), 4.0).adapter_load_us == 300_000
    assert run_one(core, req(5), 5.0).adapter_load_us == 0  # the base needs no adapter


def test_routing_prefers_the_replica_holding_the_adapter() -> None:
    core = core_for(2)
    d = run_one(core, req(0, "lora-1"), 0.0)
    holder = d.replica_id
    for i in range(1, 4):  # equal idle replicas: the holder wins every time
        assert run_one(core, req(i, "lora-1"), float(i)).replica_id == holder
    other = run_one(core, req(9, "lora-9"), 9.0)
    assert other.adapter_load_us == 300_000  # nobody holds it: someone pays the load


def test_a_batch_never_holds_more_adapters_than_the_slots() -> None:
    core = core_for()
    for i, name in enumerate(("lora-1", "lora-2", "lora-3", "", "lora-1")):
        core.submit(req(i, name), 0.0)
    batches = core.step(0.0).of_type(Dispatch)
    assert len(batches) == 1
    names = [i.adapter for i in batches[0].items]
    assert names == ["lora-1", "lora-2"]  # lora-3 would be a third: it waits
    finish(core, batches[0], 0.5)
    (rest,) = core.step(0.5).of_type(Dispatch)
    assert [i.adapter for i in rest.items] == ["lora-3", "", "lora-1"]


def test_the_adapter_applies_only_to_generate_steps_of_its_base_model() -> None:
    core = make_core(
        FcfsTenancy(), models=[SLOTS, EMBED], devs=devices(1), workflows=[single(EMBED)],
        replicas=[(EMBED.key, "d000")], config=NO_DELAY,
    )  # fmt: skip
    core.submit(req(0, "lora-1", wf=f"only-{EMBED.name}"), 0.0)
    (d,) = core.step(0.0).of_type(Dispatch)
    assert d.items[0].adapter == "" and d.adapter_load_us == 0
