"""Prefix-aware routing, live (issue 24, item 1): hit rate and time to first token of a
shared-system-prompt chat load on two replicas, with prefix routing and without it.

The stack is the product's: a gateway over real HTTP, the live core, two CPU worker processes
each holding a replica of one generate model with its own bounded prefix KV cache. The model is
a random GPT-2 (4 layers, width 256, 1024 positions) with the tiny chat model's ChatML
tokenizer: big enough that a prompt's prefill, not the HTTP and core overhead, makes most of
its time to first token, as with a real LLM, and small enough to run here in minutes
(SmolLM2-135M takes about a second per 50 prompt tokens on one of this machine's shared cores).

Load: ``PROMPTS`` system prompts (each ~350 tokens, "applications" shared by many users),
``CLIENTS`` closed-loop clients, each sending ``CALLS`` chats of a seeded random application
with its own short question, greedy, 2 output tokens. Each replica's KV cache holds about two
prompts (``prefix_cache_mib``), and the core is told as much (``prefix_capacity_blocks``), so
which replica an application's chats go to decides whether they hit.

Modes: prefix routing (the predicted-completion policy subtracting the predicted prefill
saving of the blocks a replica holds) and the same policy with ``use_prefix=False`` (hashes
are sent, the routing ignores them). Both on fresh fleets, same seeds.

That tokenizer spells the ChatML markers out in pieces, so every prompt's first 28 tokens (the
system turn's header and "You are assistant number") are shared by all applications: a chat that
misses its own prompt still reuses them, in both modes (about 7% of a prompt). What decides the
figures is whether each application's prompt stays cached where its chats go: a replica's cache
keeps a system prompt once however many of its chats ran there, and a header-only hit does not
keep an unrelated prompt (``PrefixKvCache``); before that, two chats of one application filled a
replica's two slots and evicted the other application the core still routed there.

Figures: ``prefix_hit_rate`` (prompt tokens served from a cache / prompt tokens, with prefix
routing), ``ttft_ratio_vs_no_prefix_routing`` (mean ``ttft_ms`` of the run records, on / off),
with p50s, the hit rate without prefix routing and the request counts. Goals (issue 24): hit
rate >= 0.6, TTFT ratio <= 0.7.
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import tempfile
from pathlib import Path
from typing import Any

import httpx
import torch

from control.executor import sources
from control.executor.profile import profile_model
from control.executor.protocol import ModelRef
from db import migrate
from tests.support.prefix_fleet import KEY, chat, start_fleet

PROMPTS, CLIENTS, CALLS = 4, 4, 15
BLOCK_TOKENS = 16
KV_BYTES_PER_TOKEN = 4 * 2 * 256 * 4  # layers x (key, value) x width x fp32
CACHE_MIB = 6  # about two ~330-token prompts per replica (8 KiB of KV per token)
TOPICS = ("invoices and refunds", "museums of Paris", "train timetables", "garden plants",
          "chess openings", "bread baking")  # fmt: skip


def _model(cache: Path) -> Path:
    """The benchmark's model folder (built once, seeded): under ``var`` (a model source root)."""
    target = Path("var/models/bench-chat-gpt2-256").resolve()
    if (target / "config.json").exists():
        return target
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    tok = AutoTokenizer.from_pretrained(sources.ensure_tiny("gpt2-chat", cache))
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=len(tok), n_positions=1024, n_embd=256, n_layer=4, n_head=4,
                     bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)  # fmt: skip
    target.parent.mkdir(parents=True, exist_ok=True)
    GPT2LMHeadModel(cfg).save_pretrained(target)
    tok.save_pretrained(target)
    return target


def _system(i: int) -> str:
    topic = TOPICS[i % len(TOPICS)]
    return (f"You are assistant number {i}, an expert on {topic}. " + " ".join(
        f"Rule {k}: answer questions about {topic} briefly, cite the source you used, and "
        f"ask a clarifying question when the request is ambiguous." for k in range(3)))  # fmt: skip


async def _load(url: str, key: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:

        async def one_client(c: int) -> list[dict[str, Any]]:
            rng = random.Random(c)
            out = []
            for n in range(CALLS):
                app = rng.randrange(PROMPTS)
                out.append(await chat(client, key, _system(app), f"client {c} question {n}?", 2))
            return out

        done = await asyncio.gather(*(one_client(c) for c in range(CLIENTS)))
    return [r for runs in done for r in runs]


def _profile(ref: ModelRef, cache: Path) -> list:
    """The model's latency rows, measured as ``legato profile`` measures them (cold prompts,
    no template), so the core predicts prefill times, and a hit's saving, from this machine."""
    return profile_model(ref, "cpu", batch_sizes=(1, 4), token_lengths=(16, 160, 400),
                         repeats=2, cache_dir=cache)  # fmt: skip


def _mode(root: Path, template: Path, ref: ModelRef, use_prefix: bool, rows: list) -> dict:
    capacity = CACHE_MIB * 1024 * 1024 // (BLOCK_TOKENS * KV_BYTES_PER_TOKEN)
    root.mkdir(parents=True)
    fleet = start_fleet(root, template, ref=ref, block_tokens=BLOCK_TOKENS,
                        use_prefix=use_prefix, prefix_capacity_blocks=capacity,
                        profile_rows=rows)  # fmt: skip
    try:
        runs = asyncio.run(_load(fleet.url, fleet.key))
    finally:
        fleet.stop()
    nodes = [r["nodes"]["generate"] for r in runs if r["status"] == "succeeded"]
    ttft = [n["ttft_ms"] for n in nodes]
    return {
        "runs": len(runs), "succeeded": len(nodes),
        "hit_rate": sum(n["prefix_hit_tokens"] for n in nodes)
        / max(1, sum(n["input_tokens"] for n in nodes)),
        "ttft_mean_ms": statistics.fmean(ttft), "ttft_p50_ms": statistics.median(ttft),
        "prompt_tokens_mean": statistics.fmean(n["input_tokens"] for n in nodes),
    }  # fmt: skip


def measure() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-prefix.") as tmp:
        root = Path(tmp)
        template = root / "template.db"
        migrate.upgrade(f"sqlite:///{template}")
        folder = _model(root / "models")
        ref = ModelRef(KEY, "generate", "hf", str(folder), options={"prefix_cache_mib": CACHE_MIB})
        rows = _profile(ref, root / "models")
        on = _mode(root / "on", template, ref, True, rows)
        off = _mode(root / "off", template, ref, False, rows)
    return {
        "prefix_hit_rate": round(on["hit_rate"], 3),
        "ttft_ratio_vs_no_prefix_routing": round(on["ttft_mean_ms"] / off["ttft_mean_ms"], 3),
        "ttft_p50_ratio_vs_no_prefix_routing": round(on["ttft_p50_ms"] / off["ttft_p50_ms"], 3),
        "prefix_hit_rate_without_prefix_routing": round(off["hit_rate"], 3),
        "ttft_mean_ms": {"prefix_routing": round(on["ttft_mean_ms"], 1),
                         "no_prefix_routing": round(off["ttft_mean_ms"], 1)},
        "ttft_p50_ms": {"prefix_routing": round(on["ttft_p50_ms"], 1),
                        "no_prefix_routing": round(off["ttft_p50_ms"], 1)},
        "runs": {"prefix_routing": on["succeeded"], "no_prefix_routing": off["succeeded"],
                 "asked_each": CLIENTS * CALLS},
        "prompt_tokens_mean": round(on["prompt_tokens_mean"], 1),
        "load": {"system_prompts": PROMPTS, "clients": CLIENTS, "replicas": 2,
                 "block_tokens": BLOCK_TOKENS, "prefix_cache_mib_per_replica": CACHE_MIB,
                 "model": "random GPT-2 4x256, ChatML template, CPU"},
        "goals": {"prefix_hit_rate": ">= 0.6", "ttft_ratio_vs_no_prefix_routing": "<= 0.7"},
    }  # fmt: skip


if __name__ == "__main__":
    torch.set_num_threads(1)
    print(json.dumps(measure()))
