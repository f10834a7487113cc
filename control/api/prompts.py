"""The routes' access to the gateway's prompt tokenizer (:mod:`control.services.prompt_prefix`):
a chat rendered in its model's format, and a run's prefix block hashes. A gateway without a
live path has none: chats keep the plain transcript and runs carry no blocks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from control.api.state import Gateway
from control.executor.chat_prompt import transcript
from control.services.prompt_prefix import PromptPrefixes, PromptShape

#: The gateway's ``extras`` key of its :class:`PromptPrefixes`.
PROMPT_PREFIXES = "prompt_prefixes"


def prefixes_of(gw: Gateway) -> PromptPrefixes | None:
    found = gw.extras.get(PROMPT_PREFIXES)
    return found if isinstance(found, PromptPrefixes) else None


async def chat_prompt(gw: Gateway, model_key: str, messages: Sequence[Mapping[str, str]]) -> str:
    """``messages`` as the prompt text of ``model_key`` (its chat template when it has one)."""
    prefixes = prefixes_of(gw)
    if prefixes is None:
        return transcript(messages)
    return await prefixes.render_chat(model_key, messages)


async def prompt_shape(
    gw: Gateway, workflow_key: str, payload: Mapping[str, Any], sampling: Mapping[str, Any]
) -> PromptShape:
    """The run's generate prompt: its block hashes and token count (empty when unknown)."""
    prefixes = prefixes_of(gw)
    if prefixes is None:
        return PromptShape()
    return await prefixes.shape(workflow_key, payload, sampling)
