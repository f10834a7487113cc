"""Prefix-aware routing, live (issue 24, item 1): a gateway over two real CPU workers, each with
a replica of a tiny chat GPT-2 (a ChatML template, as SmolLM2's), served over real HTTP.

Two system prompts, A and B, are each shared by many users' chats. The first chat of each is
sent at once (so they run on different replicas: the second finds the first's replica busy).
Then the users' chats come one at a time. Both replicas are idle then, so only the prefix
blocks the gateway derived from the chat-templated token ids can tell the core where A's and
B's KV prefixes are: every later A chat must run where A's first did, every B chat where B's
did, and each must be served from that replica's prefix KV cache (prefix hit tokens > 0 in
its run record). The chat is tokenized with the model's template (the billed prompt tokens
are those of the ChatML rendering), and ``/metrics`` carries the hit tokens and the time to
first token per model.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
from transformers import AutoTokenizer

from control.executor import chat_prompt
from tests.support.prefix_fleet import chat, metric, start_fleet

pytestmark = [pytest.mark.slow]

SYSTEM = {
    "A": "You are the billing assistant of Legato. Answer questions about invoices, refunds, "
    "quotas and the usage ledger politely, in one short sentence, and never invent numbers.",
    "B": "You are a travel guide for Paris. Recommend museums, walks and cafes near the river, "
    "mention opening hours when you know them, and keep every answer under twenty words.",
}
ROUNDS = 4


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, _sqlite_template):
    started = start_fleet(tmp_path_factory.mktemp("prefix"), _sqlite_template)
    yield started
    started.stop()


async def _load(url: str, key: str) -> tuple[dict[str, dict], list[tuple[str, dict]]]:
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        first = await asyncio.gather(
            *(chat(client, key, SYSTEM[s], f"first question for {s}", 48) for s in "AB")
        )
        later = []
        for i in range(ROUNDS):
            for s in "AB":
                later.append((s, await chat(client, key, SYSTEM[s], f"user {i} asks about {s}", 4)))
        return dict(zip("AB", first, strict=True)), later


def test_shared_system_prompts_are_routed_to_the_replica_holding_their_prefix(fleet):
    first, later = asyncio.run(_load(fleet.url, fleet.key))
    home = {s: run["nodes"]["generate"]["device"] for s, run in first.items()}
    assert home["A"] != home["B"], f"the two first chats ran on one replica: {home}"
    for s, run in later:
        node = run["nodes"]["generate"]
        assert run["status"] == "succeeded", run
        assert node["device"] == home[s], (s, node, home)  # routed to its prefix's holder
        assert node["prefix_hit_tokens"] > 16, (s, node)  # served from that replica's KV cache
        assert node["ttft_ms"] > 0
    cold = [r["nodes"]["generate"]["prefix_hit_tokens"] for r in first.values()]
    assert cold == [0, 0]

    # the chat went through the model's template: billed prompt tokens are the ChatML ones
    tok = AutoTokenizer.from_pretrained(fleet.cache / "tiny" / "gpt2-chat")
    messages = [{"role": "system", "content": SYSTEM["A"]},
                {"role": "user", "content": "user 0 asks about A"}]  # fmt: skip
    templated = chat_prompt.encode(tok, chat_prompt.render_messages(tok, messages))
    plain = chat_prompt.encode(tok, chat_prompt.transcript(messages))
    usage = later[0][1]["chat_usage"]
    assert usage["prompt_tokens"] == len(templated) != len(plain)

    text = httpx.get(f"{fleet.url}/metrics", timeout=30).text
    hits = metric(text, "legato_prefix_cache_hit_tokens_total")
    assert hits >= sum(r["nodes"]["generate"]["prefix_hit_tokens"] for _, r in later) > 0
    assert metric(text, "legato_generate_time_to_first_token_seconds_count") >= 2 + 2 * ROUNDS
