"""Generate adapter: a causal LM with batched decoding, streaming, stop strings and prefix reuse.

``run`` proceeds in two phases:

1. Prefill, one item at a time: the prompt's longest cached prefix (see
   :mod:`prefix_cache`) is reused and only the remaining tokens go through the model; the whole
   prompt's KV is stored back. Each item's first token is sampled here (first-token time).
2. Decode, all items together: the per-item KV caches are left-padded to one length, an attention
   mask hides the padding and explicit position ids keep each item's own positions, so an item
   decodes exactly as it would alone. One forward per step for the whole batch.

Sampling per item uses its own ``torch.Generator`` seeded with ``params.seed`` (temperature 0 is
greedy; top-p keeps the smallest set of tokens whose probability reaches ``top_p``). An item ends
on EOS, on ``max_tokens`` or when its text contains a stop string (the text is cut before it).
Streamed deltas hold back the last ``len(longest stop) - 1`` characters so a stop string is never
streamed.

Inputs: ``prompt`` (str), optional ``system`` (str, placed first so it forms a shared prefix) and
``documents`` (list of str, placed between). With ``chat: true`` in the model options and a
tokenizer chat template, the prompt is wrapped as a chat turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache

from control.executor.adapters.base import (
    InputError,
    ItemOutput,
    PreparedItem,
    RunContext,
    module_mib,
    require,
)
from control.executor.adapters.prefix_cache import PrefixKvCache
from control.executor.base import GenParams


@dataclass
class _Seq:
    """Decoding state of one item."""

    prompt_ids: list[int]
    params: GenParams
    generator: torch.Generator
    hit: int = 0
    generated: list[int] = field(default_factory=list)
    text: str = ""
    streamed: int = 0
    done: bool = False
    first_token_ms: float | None = None
    kv: list[tuple[torch.Tensor, torch.Tensor]] = field(default_factory=list)
    next_logits: torch.Tensor | None = None


class GenerateAdapter:
    task = "generate"

    def __init__(self, folder: Path, device: torch.device, options: dict) -> None:
        self.device = device
        self.chat = bool(options.get("chat", False))
        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self.model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
        self.model = self.model.to(device).eval()
        self.eos = self.model.config.eos_token_id
        self.pad_id = self.eos if isinstance(self.eos, int) else 0
        cache_mib = int(options.get("prefix_cache_mib", 64))
        self.prefix_cache = PrefixKvCache(cache_mib * 1024 * 1024)

    def memory_mib(self) -> int:
        return module_mib(self.model) + -(-self.prefix_cache.used_bytes // (1024 * 1024))

    def compose(self, prepared: PreparedItem) -> str:
        """The prompt text of an item: system, then documents, then the prompt."""
        prompt = require(prepared, "prompt", str)
        parts = []
        if "system" in prepared.inputs:
            parts.append(require(prepared, "system", str))
        if "documents" in prepared.inputs:
            docs = require(prepared, "documents", list)
            parts.append("Context:\n" + "\n".join(f"- {d}" for d in docs))
        parts.append(prompt)
        text = "\n\n".join(parts)
        if self.chat and self.tokenizer.chat_template:
            return self.tokenizer.apply_chat_template(
                [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
            )
        return text

    @torch.inference_mode()
    def run(self, items: Sequence[PreparedItem], ctx: RunContext) -> list[ItemOutput]:
        seqs: list[_Seq | None] = []
        errors: dict[int, str] = {}
        for i, p in enumerate(items):
            try:
                ids = self.tokenizer(self.compose(p)).input_ids or [self.pad_id]
            except InputError as err:
                errors[i] = str(err)
                seqs.append(None)
                continue
            gen = torch.Generator().manual_seed(p.item.params.seed)
            seq = _Seq(prompt_ids=list(ids), params=p.item.params, generator=gen)
            self._prefill(seq)
            self._accept(seq, self._sample(seq), p, ctx)
            seqs.append(seq)
            ctx.tick()
        live = [(s, p) for s, p in zip(seqs, items, strict=True) if s is not None]
        if live:
            self._decode(live, ctx)
        outputs = []
        for i, s in enumerate(seqs):
            if s is None:
                outputs.append(ItemOutput(error=errors[i]))
                continue
            outputs.append(
                ItemOutput(
                    {"text": s.text},
                    input_tokens=len(s.prompt_ids),
                    output_tokens=len(s.generated),
                    first_token_ms=s.first_token_ms,
                    prefix_hit_tokens=s.hit,
                    item_count=1,
                )
            )
        return outputs

    def _prefill(self, seq: _Seq) -> None:
        ids = seq.prompt_ids
        hit, cached = self.prefix_cache.lookup(ids)
        past = DynamicCache(ddp_cache_data=cached) if cached else DynamicCache()
        new = torch.tensor([ids[hit:]], device=self.device)
        positions = torch.arange(hit, len(ids), device=self.device).unsqueeze(0)
        out = self.model(input_ids=new, cache=past, position_ids=positions, use_cache=True)
        seq.hit = hit
        seq.kv = [(layer.keys, layer.values) for layer in out.cache.layers]
        self.prefix_cache.store(ids, seq.kv)
        seq.next_logits = out.logits[0, -1].float()

    def _sample(self, seq: _Seq) -> int:
        logits, params = seq.next_logits, seq.params
        if params.temperature == 0:
            return int(torch.argmax(logits))
        probs = torch.softmax(logits / params.temperature, dim=-1).cpu()
        if params.top_p < 1.0:
            sorted_p, order = torch.sort(probs, descending=True)
            keep = torch.cumsum(sorted_p, dim=0) - sorted_p < params.top_p
            probs = torch.zeros_like(probs).scatter_(0, order[keep], sorted_p[keep])
        return int(torch.multinomial(probs, 1, generator=seq.generator))

    def _accept(self, seq: _Seq, token: int, prepared: PreparedItem, ctx: RunContext) -> None:
        """Append a sampled token; decide whether the item is done; stream what is safe."""
        if seq.first_token_ms is None:
            seq.first_token_ms = ctx.elapsed_ms()
        eos = self.eos if isinstance(self.eos, list) else [self.eos]
        if token in eos:
            seq.done = True
        else:
            seq.generated.append(token)
            seq.text = self.tokenizer.decode(seq.generated, skip_special_tokens=True)
            cut = _earliest_stop(seq.text, seq.params.stop)
            if cut is not None:
                seq.text, seq.done = seq.text[:cut], True
            elif len(seq.generated) >= seq.params.max_tokens:
                seq.done = True
        if seq.params.stream:
            self._stream(seq, prepared, ctx)

    def _stream(self, seq: _Seq, prepared: PreparedItem, ctx: RunContext) -> None:
        hold = max((len(s) for s in seq.params.stop), default=1) - 1
        safe = len(seq.text) if seq.done else len(seq.text) - hold
        if not seq.done and seq.text.endswith("\ufffd"):
            safe = min(safe, len(seq.text) - 1)  # an incomplete UTF-8 character: wait for it
        if safe > seq.streamed:
            ctx.emit_delta(prepared.item, seq.streamed, seq.text[seq.streamed : safe])
            seq.streamed = safe

    def _decode(self, live: list[tuple[_Seq, PreparedItem]], ctx: RunContext) -> None:
        seqs = [s for s, _ in live]
        lengths = [len(s.prompt_ids) for s in seqs]
        width = max(lengths)
        cache = DynamicCache(ddp_cache_data=_left_pad([s.kv for s in seqs], lengths, width))
        mask = torch.zeros(len(seqs), width, dtype=torch.long, device=self.device)
        for row, n in enumerate(lengths):
            mask[row, width - n :] = 1
        positions = torch.tensor(lengths, device=self.device)
        last = [s.generated[-1] if s.generated else self.pad_id for s in seqs]
        while not all(s.done for s in seqs):
            mask = torch.cat(
                [mask, torch.ones(len(seqs), 1, dtype=mask.dtype, device=self.device)], 1
            )
            out = self.model(
                input_ids=torch.tensor(last, device=self.device).unsqueeze(1),
                attention_mask=mask,
                cache=cache,
                position_ids=positions.unsqueeze(1),
                use_cache=True,
            )
            cache, positions = out.cache, positions + 1
            for row, (seq, prepared) in enumerate(live):
                if seq.done:
                    continue
                seq.next_logits = out.logits[row, -1].float()
                token = self._sample(seq)
                self._accept(seq, token, prepared, ctx)
                last[row] = token
            ctx.tick()


def _left_pad(kvs, lengths: list[int], width: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Stack per-item (1, heads, n_i, dim) caches into (batch, heads, width, dim), padding left."""
    layers = []
    for layer in range(len(kvs[0])):
        keys, values = [], []
        for kv, n in zip(kvs, lengths, strict=True):
            k, v = kv[layer]
            pad = width - n
            keys.append(torch.nn.functional.pad(k, (0, 0, pad, 0)))
            values.append(torch.nn.functional.pad(v, (0, 0, pad, 0)))
        layers.append((torch.cat(keys, 0), torch.cat(values, 0)))
    return layers


def _earliest_stop(text: str, stops: Sequence[str]) -> int | None:
    found = [i for i in (text.find(s) for s in stops if s) if i >= 0]
    return min(found) if found else None
