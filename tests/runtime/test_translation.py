"""Host tools and the core -> executor translation (pure: no workers)."""

from __future__ import annotations

import pytest

from control.core.actions import BatchItem as CoreItem
from control.core.actions import InputBinding
from control.core.types import InputRef
from control.executor.protocol import InputRef as ExecRef
from control.runtime import mapping
from control.runtime.tools import RouterTool, SegmentTool, ToolInputError

RULES = {"rules": [{"label": "lookup", "keywords": ["what", "?"]}, ["math", ["sum"]]],
         "default": "chat"}  # fmt: skip


@pytest.mark.parametrize(
    ("value", "label"),
    [("What is Legato", "lookup"), ("the sum of it", "math"), ("hello", "chat"), (42, "chat")],
)
def test_router_picks_the_first_matching_rule_and_passes_the_value(value, label):
    out = RouterTool().run({"value": value}, RULES)
    assert out.label == label and out.value == {"label": label, "value": value}


@pytest.mark.parametrize(
    ("text", "max_chars", "segments"),
    [
        ("One. Two. Three.", 400, ["One. Two. Three."]),
        ("One. Two. Three.", 9, ["One. Two.", "Three."]),
        ("A long sentence here! B?", 5, ["A long sentence here!", "B?"]),
    ],
)
def test_segment_packs_whole_sentences(text, max_chars, segments):
    out = SegmentTool().run({"text": text}, {"max_chars": max_chars})
    assert out.value["segments"] == segments and out.item_count == len(segments)


@pytest.mark.parametrize(("tool", "inputs"), [(RouterTool(), {}), (SegmentTool(), {"text": 3})])
def test_tools_name_the_bad_input(tool, inputs):
    with pytest.raises(ToolInputError, match="input"):
        tool.run(inputs, {})


def _item(kind: str, bindings: dict[str, tuple[InputRef, ...]], **params) -> CoreItem:
    return CoreItem("r1/n/1", "r1", "n", 1, None, "r1/n", kind,
                    tuple(InputBinding(f, refs) for f, refs in bindings.items()), 8, 4,
                    params=params)  # fmt: skip


def _stores(**host) -> mapping.Stores:
    kinds = {"e": "embed", "seg": "segment", "m": "generate"}
    return mapping.Stores({"r1": {"q": "hi"}}, dict(host), {("r1", "m#0"), ("r1", "m#1")},
                          lambda run, node: kinds[node])  # fmt: skip


def ref(node: str, field: str, chunk: int | None = None) -> InputRef:
    return InputRef("r1", node, field, "cpu:0" if node != "input" else None, None, chunk)


def test_inputs_are_renamed_and_located():
    item = _item("vector_search", {"embedding": (ref("e", "embedding"),)})
    assert mapping.resolve_inputs(item, "vector_search", _stores()) == {
        "query_vector": ExecRef("r1", "e", "vector")
    }
    item = _item("generate", {"prompt": (ref("input", "q"),), "context": (ref("e", "embedding"),)})
    got = mapping.resolve_inputs(item, "generate", _stores())
    assert got == {"prompt": "hi", "documents": ExecRef("r1", "e", "vector")}


def test_chunks_select_host_elements_and_merged_worker_outputs_are_fetched():
    host = {("r1", "seg"): {"segments": ["a", "b"]}}
    item = _item("generate", {"prompt": (ref("seg", "segments", 1),)})
    stores = mapping.Stores({}, host, set(), lambda run, node: "segment")
    assert mapping.resolve_inputs(item, "generate", stores) == {"prompt": "b"}
    merged = _item("rerank", {"documents": (ref("m", "text", 0), ref("m", "text", 1))})
    got = mapping.resolve_inputs(merged, "rerank", _stores())
    assert got["documents"] == [mapping.Fetch("r1", "m#0", "text", None),
                                mapping.Fetch("r1", "m#1", "text", None)]  # fmt: skip
    assert len(mapping.pending_fetches(got)) == 2
    filled = mapping.substitute(got, {f: f.exec_node for f in mapping.pending_fetches(got)})
    assert filled["documents"] == ["m#0", "m#1"]


def test_missing_payload_field_is_reported():
    item = _item("embed", {"text": (ref("input", "nope"),)})
    with pytest.raises(mapping.InputUnavailable, match="nope"):
        mapping.resolve_inputs(item, "embed", _stores())


def test_gen_params_come_from_node_params():
    p = mapping.gen_params(_item("generate", {}, max_tokens=7, temperature=0.5, stop=["\n"]),
                           "generate", True)  # fmt: skip
    assert (p.max_tokens, p.temperature, p.stop, p.stream) == (7, 0.5, ("\n",), True)
    assert mapping.gen_params(_item("embed", {}), "embed", True).stream is False
