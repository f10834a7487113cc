"""The generate adapter's decode loop, which batches may join while it runs.

A :class:`DecodeLoop` holds the rows decoded together; each row is one item of one dispatched
batch (a *group*, see :class:`~control.executor.adapters.base.BatchGroup`). Its state is the
batch KV cache, ``(rows, heads, width, dim)`` per layer, the attention mask ``(rows, width)``
and each row's next position.

Joining. A group's prompts are prefilled on their own (prefix reuse as for any batch: see
:mod:`generate_chunks`), which gives a cache and mask of their own width. The narrower
of the running cache and the new one is padded with masked columns and the two are concatenated
along the rows. Every row stays exact: each step appends the new token in the rightmost column
for all rows, the mask hides padding wherever it sits and explicit position ids keep each row's
own positions, so a row attends to exactly its own keys at its own positions, whichever rows
share the batch. Sampling uses each item's own generator, so seeded outputs do not depend on
the company either. Padding goes on the LEFT (the rows stay aligned on their newest column):
then the columns that no remaining row uses all sit at the left edge, where they can be cut off
(below), instead of being holes in the middle that stay for the rest of the loop.

Chunked joining (the adapter's ``chunk_tokens`` > 0). A joiner is not prefilled at once but
queued (:meth:`DecodeLoop.join`); each loop iteration, :meth:`DecodeLoop.prefill_chunk` runs
ONE chunk forward of the oldest queued group, then the running rows make their decode step, so
they keep producing a token per iteration while a long prompt is prefilled. Queued groups go
first come first served: the next one starts (and looks up the prefix cache, which may then
hold the previous one's prompts) once the previous one has merged. A group's partial cache is
its own until its last chunk: a chunk that raises fails that group alone.

Leaving. A group is reported (``finish``) as soon as its own rows are done, not when the loop
ends. Finished rows leave the batch at the next step, and columns no live row uses any more
(all masked, on the left) are cut off, so the cache does not grow with the loop's age.

Split off from :mod:`generate` only to keep modules small: it drives the adapter's own
prefill, sampling and stopping.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from control.executor.adapters.base import (
    BatchGroup,
    InputError,
    ItemOutput,
    PreparedItem,
    RunContext,
)
from control.executor.adapters.generate_chunks import GroupPrefill

if TYPE_CHECKING:
    from control.executor.adapters.generate import GenerateAdapter, _Seq


class OneBatch:
    """A :class:`BatchGroup` for a plain ``run``: keeps the outputs for the caller."""

    def __init__(self, items: Sequence[PreparedItem], ctx: RunContext) -> None:
        self.items, self.ctx = items, ctx
        self.outputs: list[ItemOutput] = []

    def finish(self, outputs: list[ItemOutput]) -> None:
        self.outputs = outputs

    def fail(self, reason: str) -> None:  # only joiners fail this way; a first group raises
        raise RuntimeError(reason)


@dataclass
class _Member:
    """A group in the loop and the decoding state of its items (None: the item's error)."""

    group: BatchGroup
    seqs: list[_Seq | None]
    errors: dict[int, InputError] = field(default_factory=dict)

    def done(self) -> bool:
        return all(s is None or s.done for s in self.seqs)


@dataclass
class _Joining:
    """A tokenized group on its way in: its rows that have a prompt, and their prefill once
    started (chunked joins wait in the loop's queue as one of these)."""

    member: _Member
    live: list[tuple[_Seq, PreparedItem]]
    prefill: GroupPrefill | None = None


@dataclass
class _Row:
    seq: _Seq
    prepared: PreparedItem
    member: _Member


class DecodeLoop:
    def __init__(self, adapter: GenerateAdapter) -> None:
        self.adapter = adapter
        self.members: list[_Member] = []  # groups not yet reported, in join order
        self.rows: list[_Row] = []  # batch row r of cache, mask and positions
        self.cache = None  # DynamicCache of the rows, once there are any
        self.mask: torch.Tensor | None = None
        self.positions: torch.Tensor | None = None
        self.waiting: deque[_Joining] = deque()  # chunked joiners, oldest first

    @property
    def live(self) -> bool:
        """Whether any row still decodes."""
        return any(not row.seq.done for row in self.rows)

    def add(self, group: BatchGroup) -> None:
        """Prefill a group (its chunks back to back), sample its first tokens and merge its
        unfinished rows in.

        Raises only before anything of the loop changed (the prefill): the caller may then
        fail the group alone and go on."""
        joining = self._tokenize(group)
        if joining.live:
            joining.prefill = self._start(joining)
            joining.prefill.finish(between=group.ctx.tick)
        self._merge_group(joining)

    def join(self, group: BatchGroup) -> None:
        """Take a group in at a step boundary: prefilled and merged now (no chunking), or
        queued for its chunks. A group that raises is failed alone."""
        try:
            if not self.adapter.chunk_tokens:
                self.add(group)
                return
            joining = self._tokenize(group)
            if joining.live:
                self.waiting.append(joining)
            else:  # nothing to prefill: it joins (and is reported) at once
                self._merge_group(joining)
        except Exception as err:  # its own failure, not the running rows'
            group.fail(f"{type(err).__name__}: {err}")

    def prefill_chunk(self) -> None:
        """One chunk forward of the oldest queued group; after its last chunk the group is
        merged (its first tokens sampled). A group whose chunk raises is dropped and failed
        alone: its partial cache never touched the running rows."""
        if not self.waiting:
            return
        head = self.waiting[0]
        try:
            if head.prefill is None:
                head.prefill = self._start(head)
            head.prefill.advance()
            if not head.prefill.done:
                head.member.group.ctx.tick()
                return
            self.waiting.popleft()
            self._merge_group(head)  # as in ``add``: raises before the running rows change
        except Exception as err:  # its own failure, not the running rows'
            if self.waiting and self.waiting[0] is head:
                self.waiting.popleft()
            head.member.group.fail(f"{type(err).__name__}: {err}")

    def _tokenize(self, group: BatchGroup) -> _Joining:
        seqs, errors = self.adapter.tokenize(group.items, self._busy_adapters())
        live = [(s, p) for s, p in zip(seqs, group.items, strict=True) if s is not None]
        return _Joining(_Member(group, seqs, errors), live)

    def _busy_adapters(self) -> set[str]:
        """Adapters of rows still decoding or waiting for their prefill (never evicted)."""
        rows = [row.seq for row in self.rows if not row.seq.done]
        rows += [s for joining in self.waiting for s, _ in joining.live]
        return {s.adapter for s in rows if s.adapter}

    def _start(self, joining: _Joining) -> GroupPrefill:
        seqs = [s for s, _ in joining.live]
        return GroupPrefill(self.adapter, seqs, self.adapter.chunk_tokens)

    def _merge_group(self, joining: _Joining) -> None:
        """A prefilled group (or one without rows) joins: first tokens, then its rows."""
        a, member, live = self.adapter, joining.member, joining.live
        self.members.append(member)
        if not live:
            return
        group = member.group
        cache, mask = joining.prefill.cache, joining.prefill.mask
        for seq, prepared in live:
            a._accept(seq, a._sample(seq), prepared, group.ctx)
        group.ctx.tick()
        keep = [r for r, (s, _) in enumerate(live) if not s.done]
        if not keep:
            return
        if len(keep) < len(live):
            index = torch.tensor(keep, device=mask.device)
            cache.batch_select_indices(index)
            mask = mask[index]
        rows = [_Row(live[r][0], live[r][1], member) for r in keep]
        positions = torch.tensor([len(row.seq.prompt_ids) for row in rows], device=mask.device)
        self._merge(cache, mask, positions, rows)

    def report_finished(self) -> None:
        """Report every group whose items are all done (in join order), once."""
        for member in [m for m in self.members if m.done()]:
            self.members.remove(member)
            outputs = [
                self.adapter._output(s, member.errors.get(i)) for i, s in enumerate(member.seqs)
            ]
            member.group.finish(outputs)

    def step(self) -> None:
        """One forward for the unfinished rows: every one of them gets its next token."""
        a = self.adapter
        keep = [r for r, row in enumerate(self.rows) if not row.seq.done]
        if len(keep) < len(self.rows):  # finished rows leave the batch
            index = torch.tensor(keep, device=self.mask.device)
            self.cache.batch_select_indices(index)
            self.mask, self.positions = self.mask[index], self.positions[index]
            self.rows = [self.rows[r] for r in keep]
            self._trim()
        last = [row.seq.generated[-1] for row in self.rows]
        self.mask = torch.cat([self.mask, self.mask.new_ones(len(self.rows), 1)], 1)
        out = a.lora.forward(
            [row.seq.adapter for row in self.rows],
            input_ids=torch.tensor(last, device=self.mask.device).unsqueeze(1),
            attention_mask=self.mask,
            cache=self.cache,
            position_ids=self.positions.unsqueeze(1),
            use_cache=True,
        )
        self.cache, self.positions = out.cache, self.positions + 1
        for r, row in enumerate(self.rows):
            row.seq.next_logits = out.logits[r, -1].float()
            a._accept(row.seq, a._sample(row.seq), row.prepared, row.member.group.ctx)
        for member in self.members:
            member.group.ctx.tick()

    # ---- cache surgery ------------------------------------------------------------------------

    def _merge(self, cache, mask: torch.Tensor, positions: torch.Tensor, rows: list[_Row]) -> None:  # noqa: ANN001
        """Append ``rows`` (their cache, mask, positions) below the running rows."""
        if self.cache is None or not self.rows:
            self.cache, self.mask, self.positions, self.rows = cache, mask, positions, rows
            return
        width = max(self.mask.shape[1], mask.shape[1])
        # Every tensor is built before any is assigned: a failure (out of memory) leaves the
        # running rows as they were.
        merged = [
            (
                torch.cat([_pad_left(old.keys, width), _pad_left(new.keys, width)], 0),
                torch.cat([_pad_left(old.values, width), _pad_left(new.values, width)], 0),
            )
            for old, new in zip(self.cache.layers, cache.layers, strict=True)
        ]
        self.mask = torch.cat([_pad_left(self.mask, width), _pad_left(mask, width)], 0)
        for layer, (keys, values) in zip(self.cache.layers, merged, strict=True):
            layer.keys, layer.values = keys, values
        self.positions = torch.cat([self.positions, positions])
        self.rows = self.rows + rows

    def _trim(self) -> None:
        """Cut the leading columns that every remaining row masks (left by rows that left)."""
        used = self.mask.any(0)
        first = int(torch.argmax(used.int()))  # rows always have real columns: ``used`` has one
        if first == 0:
            return
        self.mask = self.mask[:, first:]
        for layer in self.cache.layers:
            layer.keys, layer.values = layer.keys[:, :, first:], layer.values[:, :, first:]


def _pad_left(t: torch.Tensor, width: int) -> torch.Tensor:
    """``t`` with zeros added before its sequence dimension (-2 for KV, -1 for a mask)."""
    if t.dim() == 2:
        return F.pad(t, (width - t.shape[1], 0))
    return F.pad(t, (0, 0, width - t.shape[-2], 0))
