"""Generate prompts go through the model's own chat template (issue 24, item 1), on the worker
and in the gateway alike: the tiny chat GPT-2 (ChatML turns, as SmolLM2's) renders a chat with
its template, a plain prompt becomes a user turn, an already rendered chat (``templated``) is
sent as it is, a model without a template gets the plain transcript; and the gateway's
tokenization (:class:`PromptPrefixes`) counts exactly the tokens the adapter prefills, so its
block hashes name prefixes the replica really holds."""

from __future__ import annotations

import asyncio

import pytest
import torch

from control.core.dag.spec import dag_from_dict
from control.core.routing.prefix_blocks import block_hashes
from control.executor import chat_prompt, sources
from control.executor.adapters.generate import GenerateAdapter
from control.executor.protocol import ModelRef
from control.services.live_catalog import LiveCatalog
from control.services.prompt_prefix import PromptPrefixes
from control.services.single_model import single_model_spec
from tests.executor.test_adapters import RecordingCtx, item

CHAT = [{"role": "system", "content": "You answer in one short sentence."},
        {"role": "user", "content": "What is the capital of France?"}]  # fmt: skip


@pytest.fixture(scope="module")
def chat_folder(model_cache):
    return sources.ensure_tiny("gpt2-chat", model_cache)


def test_a_chat_is_rendered_with_the_models_template(chat_folder):
    adapter = GenerateAdapter(chat_folder, torch.device("cpu"), {})
    text = chat_prompt.render_messages(adapter.tokenizer, CHAT)
    assert text == ("<|im_start|>system\nYou answer in one short sentence.<|im_end|>\n"
                    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
                    "<|im_start|>assistant\n")  # fmt: skip
    ids = chat_prompt.encode(adapter.tokenizer, text)
    start = adapter.tokenizer.convert_tokens_to_ids("<|im_start|>")
    assert ids[0] == start and ids.count(start) == 3  # the turn markers are single tokens
    assert "system:" not in text  # not the plain transcript of before


def test_plain_templated_and_template_less_prompts(chat_folder, model_cache):
    adapter = GenerateAdapter(chat_folder, torch.device("cpu"), {})
    rendered = chat_prompt.render_messages(adapter.tokenizer, CHAT)
    sent = item("t", {"prompt": rendered}, templated=True)
    assert adapter.compose(sent) == rendered  # not wrapped a second time
    plain = item("p", {"prompt": "hello"})
    assert adapter.compose(plain) == "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n"
    bare = GenerateAdapter(model_cache / "tiny" / "gpt2", torch.device("cpu"), {})
    assert not chat_prompt.has_template(bare.tokenizer)
    assert bare.compose(plain) == "hello"
    assert chat_prompt.render_messages(bare.tokenizer, CHAT) == (
        "system: You answer in one short sentence.\n"
        "user: What is the capital of France?\nassistant:"
    )


@pytest.mark.parametrize(("arch", "templated"), [("gpt2-chat", True), ("gpt2-chat", False),
                                                 ("gpt2", False)])  # fmt: skip
def test_the_gateway_counts_the_tokens_the_adapter_prefills(model_cache, chat_folder, arch,
                                                            templated):  # fmt: skip
    key = f"m-{arch}:1"
    refs = {key: ModelRef(key, "generate", "tiny", arch)}
    spec = dag_from_dict({**single_model_spec(key, "generate"), "workflow": "model.m:1"})
    prefixes = PromptPrefixes(refs, model_cache, 16, LiveCatalog(workflows={"model.m:1": spec}))
    adapter = GenerateAdapter(model_cache / "tiny" / arch, torch.device("cpu"), {})

    async def shaped():
        prompt = await prefixes.render_chat(key, CHAT) if templated else "a plain prompt " * 9
        sampling = {"templated": True} if templated else {}
        return prompt, await prefixes.shape("model.m:1", {"prompt": prompt}, sampling)

    prompt, shape = asyncio.run(shaped())
    (out,) = adapter.run([item("x", {"prompt": prompt}, templated=templated, max_tokens=1)],
                         RecordingCtx())  # fmt: skip
    assert shape.tokens == out.input_tokens > 16
    ids = chat_prompt.encode(adapter.tokenizer, adapter.compose(item("x", {"prompt": prompt},
                                                                   templated=templated)))  # fmt: skip
    assert shape.prefix_blocks == block_hashes(ids, 16) and len(shape.prefix_blocks) >= 1


def test_a_workflow_whose_prompt_is_built_mid_run_carries_no_blocks(model_cache, chat_folder):
    key = "m:1"
    rag = dag_from_dict({
        "workflow": "rag:1", "inputs": {"q": "text", "docs": "documents"},
        "outputs": {"text": "g.text"},
        "nodes": [{"id": "g", "task": "generate", "model": key}],
        "edges": [{"from": "input.q", "to": "g.prompt"}, {"from": "input.docs", "to": "g.context"}],
    })  # fmt: skip
    refs = {key: ModelRef(key, "generate", "tiny", "gpt2-chat")}
    prefixes = PromptPrefixes(refs, model_cache, 16, LiveCatalog(workflows={"rag:1": rag}))
    shape = asyncio.run(prefixes.shape("rag:1", {"q": "long question " * 20, "docs": ["d"]}, {}))
    assert shape.prefix_blocks == () and shape.tokens == 0
