"""Generate adapter: a causal LM with batched prefill and decode, streaming, stop strings and
prefix reuse.

``run`` makes ONE forward pass for the prompts of the whole batch, then one forward per decode
step for the whole batch:

1. Prefill, fused. Each prompt's longest cached prefix (see :mod:`prefix_cache`) is reused and
   only its remaining tokens (the suffix) are computed. The batch's cache is laid out per row as
   ``[left padding | cached prefix | suffix | right padding]``: cached prefixes are left-padded
   to the longest hit, suffixes right-padded to the longest suffix. An attention mask hides the
   padding and explicit position ids keep each row's own positions, so a row computes exactly
   what it would alone. Right-padding the suffixes means no query row is ever fully masked (a
   padded query still sees its row's real tokens), which keeps every attention backend finite.
   Logits are kept only at each row's last real position (``logits_to_keep``), not for every
   prompt token: the LM head is a fifth of a small model's weights.
2. Decode, together. The same cache continues (its padding stays masked); rows that finished
   are dropped from the batch so they stop costing compute.
3. Continuous batching (``run_continuous``): at every decode step boundary, batches of the same
   replica waiting in the worker join the running loop (their own fused prefill, then their
   cache rows are merged in; see :mod:`generate_join`), and each batch is reported as soon as
   its own items are done. ``run`` is the same loop for one batch, with nothing joining.

Why fused and not one prefill per prompt: on a CPU (and for small batches on a GPU) a forward's
cost is dominated by reading the weights, so N single-prompt prefills cost about N decode
steps even when the cache hit leaves one token to compute, while one batched forward reads the
weights once. Prefix reuse therefore pays whenever it shortens the batch's longest suffix or
its compute; a hit shorter than ``min_hit_tokens`` is not used (copying it costs more than
computing it).

Sampling per item uses its own ``torch.Generator`` seeded with ``params.seed`` (temperature 0 is
greedy; top-p keeps the smallest set of tokens whose probability reaches ``top_p``). An item ends
on EOS, on ``max_tokens`` or when its text contains a stop string (the text is cut before it).
Streamed deltas hold back the last ``len(longest stop) - 1`` characters so a stop string is never
streamed.

Inputs: ``prompt`` (str), optional ``system`` (str, placed first so it forms a shared prefix) and
``documents`` (list of str, placed between). When the tokenizer has a chat template the prompt
is wrapped as a user turn of it (instruct models such as SmolLM2-Instruct answer plain text with
an immediate end-of-sequence or with loops); ``chat: false`` in the model options turns that off,
``chat: true`` insists (and is ignored by a tokenizer without a template).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache

from control.executor.adapters.base import (
    BatchGroup,
    InputError,
    ItemOutput,
    PreparedItem,
    RunContext,
    module_mib,
    require,
)
from control.executor.adapters.generate_join import DecodeLoop, OneBatch
from control.executor.adapters.prefix_cache import KV, PrefixKvCache
from control.executor.base import GenParams


@dataclass
class _Seq:
    """Decoding state of one item."""

    prompt_ids: list[int]
    params: GenParams
    generator: torch.Generator
    hit: int = 0
    cached: KV | None = None
    generated: list[int] = field(default_factory=list)
    text: str = ""
    streamed: int = 0
    done: bool = False
    first_token_ms: float | None = None
    next_logits: torch.Tensor | None = None


class GenerateAdapter:
    task = "generate"

    def __init__(self, folder: Path, device: torch.device, options: dict) -> None:
        self.device = device
        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self.chat = bool(options.get("chat", True)) and bool(self.tokenizer.chat_template)
        self.model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
        self.model = self.model.to(device).eval()
        self.eos = self.model.config.eos_token_id
        self.pad_id = self.eos if isinstance(self.eos, int) else 0
        cache_mib = int(options.get("prefix_cache_mib", 64))
        self.prefix_cache = PrefixKvCache(
            cache_mib * 1024 * 1024, int(options.get("min_hit_tokens", 2))
        )

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
        if self.chat:
            return self.tokenizer.apply_chat_template(
                [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
            )
        return text

    def run(self, items: Sequence[PreparedItem], ctx: RunContext) -> list[ItemOutput]:
        """One batch on its own (the profiler, tests): ``run_continuous`` with no joins."""
        group = OneBatch(items, ctx)
        self.run_continuous(group, lambda: ())
        return group.outputs

    @torch.inference_mode()
    def run_continuous(self, first: BatchGroup, joins: Callable[[], Sequence[BatchGroup]]) -> None:
        """Decode ``first`` and every group that joins at a step boundary; report each group
        when its rows are done. A joiner whose own prefill raises is failed alone (the running
        rows are untouched: merging happens after it succeeded); any other error propagates."""
        loop = DecodeLoop(self)
        loop.add(first)
        while True:
            loop.report_finished()
            if not loop.live:
                return
            for group in joins():
                try:
                    loop.add(group)
                except Exception as err:  # its own failure, not the running rows'
                    group.fail(f"{type(err).__name__}: {err}")
            loop.report_finished()  # joiners done at their first token go out now
            loop.step()

    def tokenize(self, items: Sequence[PreparedItem]) -> tuple[list[_Seq | None], dict[int, str]]:
        """Decoding state per item (None for an item with unusable inputs) and those errors."""
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
            seqs.append(_Seq(prompt_ids=list(ids), params=p.item.params, generator=gen))
        return seqs, errors

    @staticmethod
    def _output(s: _Seq | None, error: str | None) -> ItemOutput:
        if s is None:
            return ItemOutput(error=error)
        return ItemOutput(
            {"text": s.text},
            input_tokens=len(s.prompt_ids),
            output_tokens=len(s.generated),
            first_token_ms=s.first_token_ms,
            prefix_hit_tokens=s.hit,
            item_count=1,
        )

    # ---- prefill ------------------------------------------------------------------------------

    def _prefill(self, seqs: list[_Seq]) -> tuple[DynamicCache, torch.Tensor]:
        """One forward over every row's uncached suffix; sets each row's first-token logits and
        stores each whole prompt's KV in the prefix cache. Returns the batch cache and mask."""
        for s in seqs:
            s.hit, s.cached = self.prefix_cache.lookup(s.prompt_ids)
        width = max(s.hit for s in seqs)  # past columns (cached prefixes, left-padded)
        suffix = [len(s.prompt_ids) - s.hit for s in seqs]
        span = max(suffix)  # new columns (suffixes, right-padded)
        ids = torch.full((len(seqs), span), self.pad_id, dtype=torch.long)
        pos = torch.zeros((len(seqs), span), dtype=torch.long)
        mask = torch.zeros((len(seqs), width + span), dtype=torch.long)
        for row, (s, n) in enumerate(zip(seqs, suffix, strict=True)):
            ids[row, :n] = torch.tensor(s.prompt_ids[s.hit :])
            pos[row, :n] = torch.arange(s.hit, s.hit + n)
            pos[row, n:] = s.hit + n - 1  # padding: any valid position, masked anyway
            mask[row, width - s.hit : width + n] = 1
        past = DynamicCache(ddp_cache_data=_left_pad(seqs, width)) if width else DynamicCache()
        last = sorted(set(n - 1 for n in suffix))
        out = self.model(
            input_ids=ids.to(self.device),
            attention_mask=mask.to(self.device),
            position_ids=pos.to(self.device),
            cache=past,
            use_cache=True,
            logits_to_keep=torch.tensor(last, device=self.device),
        )
        for row, (s, n) in enumerate(zip(seqs, suffix, strict=True)):
            s.next_logits = out.logits[row, last.index(n - 1)].float()
            s.cached = None
        if self.prefix_cache.max_bytes:
            self._store_prompts(seqs, out.cache, width, suffix)
        return out.cache, mask.to(self.device)

    def _store_prompts(self, seqs, cache, width: int, suffix: list[int]) -> None:  # noqa: ANN001
        layers = [(layer.keys, layer.values) for layer in cache.layers]
        for row, (s, n) in enumerate(zip(seqs, suffix, strict=True)):
            lo, hi = width - s.hit, width + n
            kv = [(k[row : row + 1, :, lo:hi].clone(), v[row : row + 1, :, lo:hi].clone())
                  for k, v in layers]  # fmt: skip
            self.prefix_cache.store(s.prompt_ids, kv)

    # ---- sampling and stopping ----------------------------------------------------------------

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


def _left_pad(seqs: list[_Seq], width: int) -> KV:
    """Stack the rows' cached prefixes (1, heads, hit, dim) into (batch, heads, width, dim),
    padding on the left; a row without a hit is all padding."""
    template = next(s.cached for s in seqs if s.cached)
    layers = []
    for layer, (k0, v0) in enumerate(template):
        keys, values = [], []
        for s in seqs:
            if s.cached:
                k, v = s.cached[layer]
            else:
                k, v = k0[:, :, :0], v0[:, :, :0]
            keys.append(torch.nn.functional.pad(k, (0, 0, width - s.hit, 0)))
            values.append(torch.nn.functional.pad(v, (0, 0, width - s.hit, 0)))
        layers.append((torch.cat(keys, 0), torch.cat(values, 0)))
    return layers


def _earliest_stop(text: str, stops: Sequence[str]) -> int | None:
    found = [i for i in (text.find(s) for s in stops if s) if i >= 0]
    return min(found) if found else None
