"""The gateway's half of prefix-aware routing: a generate prompt tokenized as its replica will
tokenize it, and the chained hashes of its token blocks, which the core routes by.

A request's prefix blocks are known here only when its generate prompt is: the run's workflow
has exactly one generate node and that node's only input is ``prompt``, fed straight from a
request input (the one-model workflows of the OpenAI routes, a session's chat workflow). A
prompt that a workflow builds from earlier steps (a RAG answer over retrieved documents) is
known only mid-run, so such a run carries no blocks and is routed on load alone.

The text goes through :mod:`control.executor.chat_prompt` exactly as the worker's generate
adapter sends it (the model's tokenizer, its chat template, its ``chat`` option), then
:func:`~control.core.routing.prefix_blocks.block_hashes`. Tokenizers are loaded from the
model's local folder, once per model, off the event loop; a model whose tokenizer cannot be
loaded here gets no blocks (and a chat of it the plain transcript), never an error.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from control.core.dag.spec import INPUT_NODE, DagSpec
from control.core.routing.prefix_blocks import block_hashes
from control.executor import chat_prompt, sources
from control.executor.protocol import ModelRef
from control.services.live_catalog import LiveCatalog

log = logging.getLogger(__name__)
#: Prompts up to this many characters are tokenized on the event loop (well under a
#: millisecond); longer ones in a thread, so a 200,000-character prompt stalls no other call.
INLINE_CHARS = 8192


@dataclass(frozen=True)
class PromptShape:
    """A generate prompt as the replica will see it: its block hashes and token count."""

    prefix_blocks: tuple[int, ...] = ()
    tokens: int = 0


class PromptPrefixes:
    """Tokenizes generate prompts for the gateway. ``refs``: model key -> executor reference
    (the runtime's); ``catalog``: the live catalog (its workflows by ``name:version``, read
    at each call: admin changes replace them)."""

    def __init__(
        self,
        refs: Mapping[str, ModelRef],
        cache_dir: Path,
        block_tokens: int,
        catalog: LiveCatalog,
    ) -> None:
        if block_tokens < 1:
            raise ValueError(f"block_tokens must be >= 1, got {block_tokens!r}")
        self.refs, self.cache_dir = refs, Path(cache_dir)
        self.block_tokens = block_tokens
        self.catalog = catalog
        self._tokenizers: dict[str, asyncio.Future[Any]] = {}

    async def tokenizer(self, model_key: str) -> Any | None:
        """The model's tokenizer (loaded once, in a thread); None when it has no local
        weights here or they cannot be read (logged once)."""
        found = self._tokenizers.get(model_key)
        if found is None:  # one load per model, however many calls wait for it
            found = asyncio.ensure_future(asyncio.to_thread(self._load, model_key))
            self._tokenizers[model_key] = found
        return await found

    def _load(self, model_key: str) -> Any | None:
        ref = self.refs.get(model_key)
        if ref is None or ref.task != "generate":
            return None
        try:
            from transformers import AutoTokenizer

            folder = sources.resolve(ref, self.cache_dir)
            return None if folder is None else AutoTokenizer.from_pretrained(folder)
        except Exception:  # a prompt without blocks routes on load alone: never fail a call
            log.warning("no tokenizer for %s: its prompts carry no prefix blocks", model_key,
                        exc_info=True)  # fmt: skip
            return None

    async def render_chat(self, model_key: str, messages: Sequence[Mapping[str, str]]) -> str:
        """A chat in the model's own format (its chat template; a plain ``role: content``
        transcript for a model without one, or whose tokenizer is not readable here)."""
        tok = await self.tokenizer(model_key)
        if tok is None:
            return chat_prompt.transcript(messages)
        return chat_prompt.render_messages(tok, messages)

    async def shape(
        self, workflow_key: str, payload: Mapping[str, Any], sampling: Mapping[str, Any]
    ) -> PromptShape:
        """The run's generate prompt shape, or an empty one when it is not known up front
        (see the module's docstring). ``sampling["templated"]``: the prompt is a rendered chat."""
        found = self._fed_prompt(workflow_key, payload)
        if found is None:
            return PromptShape()
        model_key, text = found
        tok = await self.tokenizer(model_key)
        if tok is None:
            return PromptShape()
        ref = self.refs[model_key]
        if not sampling.get("templated") and chat_prompt.chat_enabled(tok, ref.options):
            text = chat_prompt.user_turn(tok, text)
        if len(text) > INLINE_CHARS:  # a long prompt is tokenized off the event loop
            ids = await asyncio.to_thread(chat_prompt.encode, tok, text)
        else:
            ids = chat_prompt.encode(tok, text)
        return PromptShape(block_hashes(ids, self.block_tokens), len(ids))

    def _fed_prompt(self, workflow_key: str, payload: Mapping[str, Any]) -> tuple[str, str] | None:
        """(model key, prompt text) of the workflow's one generate node fed only a request
        input as its prompt; None otherwise."""
        spec: DagSpec | None = self.catalog.workflows.get(workflow_key)
        if spec is None:
            return None
        gens = [n for n in spec.nodes if n.task == "generate" and n.model]
        if len(gens) != 1 or gens[0].map_over is not None:
            return None
        node = gens[0]
        feeds = [e for e in spec.edges if e.target == node.node_id]
        if len(feeds) != 1 or feeds[0].source != INPUT_NODE or feeds[0].target_field != "prompt":
            return None
        text = payload.get(feeds[0].source_field)
        return (str(node.model), text) if isinstance(text, str) else None
