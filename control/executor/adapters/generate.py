"""Generate adapter: a causal LM with batched prefill and decode, streaming, stop strings and
prefix reuse.

``run`` makes ONE forward pass for the prompts of the whole batch, then one forward per decode
step for the whole batch:

1. Prefill, fused. Each prompt's longest cached prefix (see :mod:`prefix_cache`) is reused and
   only its remaining tokens (the suffix) are computed, for all rows in one forward, each row
   exactly as it would be alone (padding masked, explicit positions); logits are kept only at
   each row's last position. See :mod:`generate_chunks`.
2. Decode, together. The same cache continues (its padding stays masked); rows that finished
   are dropped from the batch so they stop costing compute.
3. Continuous batching (``run_continuous``): at every decode step boundary, batches of the same
   replica waiting in the worker join the running loop (their own prefill, then their cache
   rows are merged in; see :mod:`generate_join`), and each batch is reported as soon as its own
   items are done. ``run`` is the same loop for one batch, with nothing joining.
4. Chunked prefill (model option ``prefill_chunk_tokens``, an int; absent or 0: off). A long
   joining prompt would stall every running row for its whole prefill. With the option, a
   group's suffixes are prefilled in chunks of at most that many tokens (over the group's rows)
   and the running rows make one decode step between two chunks ("stall-free batching", as in
   Sarathi-Serve and vLLM); waiting groups are prefilled first come first served, one chunk per
   loop iteration. The first group of a loop is chunked the same way, its chunks back to back
   (nothing runs yet to interleave with): one code path, and no forward ever computes more
   than the budget, which bounds a forward's activation memory and duration. Outputs are the
   same with or without chunks.

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
``chat: true`` insists (and is ignored by a tokenizer without a template). An item whose
``params.templated`` is set carries a prompt already rendered in the model's chat format (the
gateway rendered a chat's messages with this model's template): it is tokenized as it is. Both
go through :mod:`control.executor.chat_prompt`, as the gateway's prefix hashing does.

Precision variants (``bf16``, ``int8``; :mod:`control.executor.precision`) run every path above
unchanged: logits are read as float32 before sampling, the KV cache keeps the model's dtype.
LoRA adapters (:mod:`lora`): an item naming an ``adapter`` runs with it, loaded on demand (at
most ``max_adapters`` held, model option, default 8); rows of different adapters share every
forward (PEFT mixed-adapter batches), continuous joins and chunked prefill included. Their
prompts neither use nor fill the prefix cache (its KV was computed by the base weights).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache

from control.executor import chat_prompt
from control.executor.adapters.base import (
    BatchGroup,
    InputError,
    ItemOutput,
    PreparedItem,
    RunContext,
    module_mib,
    require,
    require_texts,
)
from control.executor.adapters.generate_chunks import GroupPrefill
from control.executor.adapters.generate_join import DecodeLoop, OneBatch
from control.executor.adapters.lora import LoraSlots, max_adapters
from control.executor.adapters.prefix_cache import KV, PrefixKvCache
from control.executor.precision import apply_precision
from control.executor.protocol import ExecutorError, GenParams


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
    room: int | None = None  # tokens the model's context has left after the prompt (None: any)
    #: what ended it: "stop" (end of sequence, or a stop string) or "length" (``max_tokens``,
    #: or the model's context full); the caller's ``finish_reason``
    finish: str = "length"
    adapter: str = ""  # the LoRA adapter's name on this replica ("": the base model)


class GenerateAdapter:
    task = "generate"

    def __init__(
        self, folder: Path, device: torch.device, options: dict, precision: str = "fp32"
    ) -> None:
        self.chunk_tokens = _chunk_tokens(options)  # checked before the (slow) model load
        capacity = max_adapters(options)
        self.device = device
        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self.chat = chat_prompt.chat_enabled(self.tokenizer, options)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
        # any precision (bf16 KV rows, int8 linears) runs the same prefill, join and chunk
        # paths: they build masks and positions as integers and read logits as float32
        self.model = apply_precision(model.to(device).eval(), precision, device)
        self.eos = self.model.config.eos_token_id
        # positions past it make absolute-position models raise (GPT-2) and others drift
        self.context = getattr(self.model.config, "max_position_embeddings", None)
        self.pad_id = self.eos if isinstance(self.eos, int) else 0
        self.lora = LoraSlots(self.model, capacity)
        cache_mib = int(options.get("prefix_cache_mib", 64))
        self.prefix_cache = PrefixKvCache(
            cache_mib * 1024 * 1024, int(options.get("min_hit_tokens", 2))
        )

    def memory_mib(self) -> int:
        return module_mib(self.model) + -(-self.prefix_cache.used_bytes // (1024 * 1024))

    def compose(self, prepared: PreparedItem) -> str:
        """The prompt text of an item: system, then documents, then the prompt (as it is when
        the gateway already rendered it in the chat format)."""
        prompt = require(prepared, "prompt", str)
        if prepared.item.params.templated:
            return prompt
        parts = []
        if "system" in prepared.inputs:
            parts.append(require(prepared, "system", str))
        if "documents" in prepared.inputs:
            docs = require_texts(prepared, "documents")
            parts.append("Context:\n" + "\n".join(f"- {d}" for d in docs))
        parts.append(prompt)
        text = "\n\n".join(parts)
        return chat_prompt.user_turn(self.tokenizer, text) if self.chat else text

    def run(self, items: Sequence[PreparedItem], ctx: RunContext) -> list[ItemOutput]:
        """One batch on its own (the profiler, tests): ``run_continuous`` with no joins."""
        group = OneBatch(items, ctx)
        self.run_continuous(group, lambda: ())
        return group.outputs

    @torch.inference_mode()
    def run_continuous(self, first: BatchGroup, joins: Callable[[], Sequence[BatchGroup]]) -> None:
        """Decode ``first`` and every group that joins at a step boundary; report each group
        when its rows are done. A joiner whose own prefill raises is failed alone (the running
        rows are untouched: merging happens after it succeeded); any other error propagates.
        With chunked prefill, each iteration runs one chunk of the oldest waiting joiner, then
        one decode step of the running rows."""
        loop = DecodeLoop(self)
        loop.add(first)
        while True:
            loop.report_finished()
            if not loop.live and not loop.waiting:
                return
            for group in joins():
                loop.join(group)  # whole now, or queued for its chunks
            loop.prefill_chunk()
            loop.report_finished()  # joiners done at their first token go out now
            if loop.live:  # false only while a joiner is prefilled after every row finished
                loop.step()

    def tokenize(
        self, items: Sequence[PreparedItem], busy: Collection[str] = ()
    ) -> tuple[list[_Seq | None], dict[int, InputError]]:
        """Decoding state per item (None for an item with unusable inputs) and those errors. A
        prompt longer than the model's context is such an error; a shorter one decodes at most
        to the end of the context. Items' adapters are loaded here (an adapter that does not
        load is the item's error, field ``adapter``); ``busy``: adapters of rows decoding now,
        never evicted for these."""
        seqs: list[_Seq | None] = []
        errors: dict[int, InputError] = {}
        busy = set(busy)
        for i, p in enumerate(items):
            try:
                adapter = self._adapter(p, busy)
                ids = chat_prompt.encode(self.tokenizer, self.compose(p)) or [self.pad_id]
                room = None if self.context is None else self.context - len(ids)
                if room is not None and room < 0:
                    raise InputError(
                        f"input 'prompt' is {len(ids)} tokens long with its context; the "
                        f"model takes at most {self.context}",
                        "prompt",
                    )
            except InputError as err:
                errors[i] = err
                seqs.append(None)
                continue
            gen = torch.Generator().manual_seed(p.item.params.seed)
            seqs.append(_Seq(list(ids), p.item.params, gen, room=room, adapter=adapter))
        return seqs, errors

    def _adapter(self, prepared: PreparedItem, busy: set[str]) -> str:
        ref = prepared.item.adapter
        if ref is None:
            return ""
        try:
            busy.add(self.lora.ensure(ref, busy))
        except ExecutorError as err:
            raise InputError(str(err), "adapter") from err
        return ref.name

    def _prefill(self, seqs: list[_Seq]) -> tuple[DynamicCache, torch.Tensor]:
        """The whole prefill of ``seqs`` (see :class:`GroupPrefill`): sets each row's first-token
        logits, stores each prompt's KV in the prefix cache; returns the group's cache and mask."""
        prefill = GroupPrefill(self, seqs, self.chunk_tokens)
        prefill.finish()
        return prefill.cache, prefill.mask

    @staticmethod
    def _output(s: _Seq | None, error: InputError | None) -> ItemOutput:
        if s is None:
            return ItemOutput(error=str(error), field=error.field if error else None)
        return ItemOutput(
            {"text": s.text, "finish_reason": s.finish},
            input_tokens=len(s.prompt_ids),
            output_tokens=len(s.generated),
            first_token_ms=s.first_token_ms,
            prefix_hit_tokens=s.hit,
            item_count=1,
        )

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
            seq.done, seq.finish = True, "stop"
        else:
            seq.generated.append(token)
            seq.text = self.tokenizer.decode(seq.generated, skip_special_tokens=True)
            cut = _earliest_stop(seq.text, seq.params.stop)
            if cut is not None:
                seq.text, seq.done, seq.finish = seq.text[:cut], True, "stop"
            elif len(seq.generated) >= seq.params.max_tokens:
                seq.done = True
            elif seq.room is not None and len(seq.generated) >= seq.room:
                seq.done = True  # the context is full: the next position does not exist
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


def _chunk_tokens(options: dict) -> int:
    """The ``prefill_chunk_tokens`` option: an int >= 0 (absent, None or 0: no chunks)."""
    value = options.get("prefill_chunk_tokens")
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ExecutorError(
            f"generate option 'prefill_chunk_tokens' must be an int >= 0 (0: off), got {value!r}"
        )
    return value


def _earliest_stop(text: str, stops: Sequence[str]) -> int | None:
    found = [i for i in (text.find(s) for s in stops if s) if i >= 0]
    return min(found) if found else None
