"""LoRA adapters on a generate replica (issue 27, item 4): an adapter changes the output, rows
of different adapters in one batch each get what they get alone (PEFT mixed-adapter batches),
the replica keeps at most ``max_adapters`` and evicts the least recently used, an adapter
folder that does not load fails its item naming ``adapter``, and the adapter travels to a
worker process inside the batch item."""

from __future__ import annotations

import pickle

import pytest
import torch

from control.executor.adapters.base import PreparedItem
from control.executor.adapters.generate import GenerateAdapter
from control.executor.protocol import AdapterRef, BatchItem, ExecutorError, GenParams, StepKey, wire
from tests.executor.test_adapters import RecordingCtx
from tests.support.lora_adapters import make_adapter

PROMPTS = ("the quick brown fox", "once upon a time there", "a b c d e f")


@pytest.fixture(scope="module")
def adapters(model_cache, tmp_path_factory) -> dict[str, AdapterRef]:
    root = tmp_path_factory.mktemp("lora")
    base = model_cache / "tiny" / "gpt2"
    return {
        f"a{i}": AdapterRef(f"a{i}", str(make_adapter(base, root / f"a{i}", seed=i)))
        for i in range(4)
    }


def _item(key: str, prompt: str, adapter: AdapterRef | None) -> PreparedItem:
    inputs = {"prompt": prompt}
    params = GenParams(max_tokens=8)
    return PreparedItem(BatchItem(StepKey("r", key), key, inputs, params, adapter=adapter), inputs)


def _texts(gen: GenerateAdapter, rows: list[tuple[str, AdapterRef | None]]) -> list[str]:
    items = [_item(str(i), p, a) for i, (p, a) in enumerate(rows)]
    return [out.value["text"] for out in gen.run(items, RecordingCtx())]


def _gen(model_cache, **options) -> GenerateAdapter:
    options.setdefault("chat", False)
    return GenerateAdapter(model_cache / "tiny" / "gpt2", torch.device("cpu"), options)


def test_an_adapter_changes_the_output_and_mixed_batches_match_each_row_alone(
    model_cache, adapters
):
    gen = _gen(model_cache)
    a0, a1 = adapters["a0"], adapters["a1"]
    rows = [(PROMPTS[0], None), (PROMPTS[0], a0), (PROMPTS[1], a1), (PROMPTS[2], a0)]
    alone = [_texts(gen, [row])[0] for row in rows]
    assert alone[0] != alone[1], "the adapter did not change the output"
    assert _texts(gen, [(PROMPTS[0], a1)])[0] != alone[1], "two adapters gave one output"
    assert _texts(gen, rows) == alone  # one mixed batch: each row as it ran alone
    assert _texts(gen, [(PROMPTS[0], None)]) == [alone[0]]  # the base is still the base


def test_the_replica_keeps_at_most_max_adapters_and_evicts_the_least_recently_used(
    model_cache, adapters
):
    gen = _gen(model_cache, max_adapters=2)
    a0, a1, a2 = adapters["a0"], adapters["a1"], adapters["a2"]
    first = _texts(gen, [(PROMPTS[0], a0)])
    _texts(gen, [(PROMPTS[0], a1)])
    _texts(gen, [(PROMPTS[0], a0)])  # a0 used again: a1 is now the least recent
    _texts(gen, [(PROMPTS[0], a2)])
    assert gen.lora.held == ("a0", "a2") and gen.lora.evicted == ["a1"]
    assert gen.lora.loads == 3
    _texts(gen, [(PROMPTS[0], a1)])  # loaded again, evicting a0
    assert gen.lora.held == ("a2", "a1") and gen.lora.evicted == ["a1", "a0"]
    assert _texts(gen, [(PROMPTS[0], a0)]) == first  # reloaded, same weights, same text


def test_a_batch_with_more_adapters_than_slots_still_runs_each_row_with_its_own(
    model_cache, adapters
):
    gen = _gen(model_cache, max_adapters=2)
    rows = [(PROMPTS[0], adapters[f"a{i}"]) for i in range(4)]
    alone = [_texts(_gen(model_cache), [row])[0] for row in rows]
    assert _texts(gen, rows) == alone  # all four in use: none evicted mid-batch
    _texts(gen, [(PROMPTS[0], None)])
    _texts(gen, [(PROMPTS[1], adapters["a0"])])
    assert len(gen.lora.held) == 2  # back within the slots once they were free


def test_an_adapter_that_does_not_load_fails_its_item_naming_adapter(model_cache, tmp_path):
    gen = _gen(model_cache)
    bad = AdapterRef("bad", str(tmp_path))  # no adapter_config.json
    outs = gen.run([_item("0", PROMPTS[0], bad), _item("1", PROMPTS[0], None)], RecordingCtx())
    assert outs[0].field == "adapter" and "did not load" in outs[0].error
    assert outs[1].error is None and outs[1].value["text"]


def test_the_adapter_travels_in_the_batch_item_and_names_are_checked():
    ref = AdapterRef("t1-support", "/models/adapters/support")
    item = BatchItem(StepKey("r", "n"), "k", {"prompt": "hi"}, adapter=ref)
    assert pickle.loads(wire.encode(("batch", item)))[1].adapter == ref
    with pytest.raises(ExecutorError, match="AdapterRef.name"):
        AdapterRef("a.b", "/x")
    with pytest.raises(ExecutorError, match="max_adapters"):
        GenerateAdapter(None, torch.device("cpu"), {"max_adapters": 0})  # type: ignore[arg-type]


@pytest.mark.parametrize("chunk", [0, 8])
def test_batches_joining_a_running_loop_keep_their_adapters(model_cache, adapters, chunk):
    # a runs with a0 and the base; b joins mid-decode with a1 and a0; c joins later with a2
    # and evicts nothing in use (two slots, a0 and a1 still decoding): every row as alone,
    # with continuous joins and with chunked prefill alike
    from tests.executor.test_continuous_batching import Group, run_joined

    a0, a1, a2 = adapters["a0"], adapters["a1"], adapters["a2"]
    a = [_item("a0", PROMPTS[0], a0), _item("a1", PROMPTS[1], None)]
    b = [_item("b0", PROMPTS[2], a1), _item("b1", PROMPTS[0], a0)]
    c = [_item("c0", PROMPTS[1], a2)]
    log: list = []
    ga, gb, gc = Group("a", a, log), Group("b", b, log), Group("c", c, log)
    gen = _gen(model_cache, max_adapters=2, prefill_chunk_tokens=chunk)
    run_joined(gen, ga, {2: [gb], 4: [gc]}, log)
    for group, items in ((ga, a), (gb, b), (gc, c)):
        assert group.error is None, group.error
        solo = _gen(model_cache).run(items, RecordingCtx())
        assert [o.value["text"] for o in group.outputs] == [o.value["text"] for o in solo]
