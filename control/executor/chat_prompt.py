"""How a generate step's text becomes the model's prompt: the model's own chat template, applied
by its own tokenizer, in ONE place used by both sides.

The worker's generate adapter tokenizes with these functions, and so does the gateway when it
derives a request's prefix block hashes (:mod:`control.services.prompt_prefix`): the two must
produce the very same token ids, or the hashes would name prefixes no replica holds.

* :func:`render_messages`: a chat (a list of ``{"role", "content"}``) in the model's format,
  ready for the assistant's turn. A tokenizer without a chat template (the tiny test GPT-2, a
  plain base model) gets a plain ``role: content`` transcript ending in ``assistant:``: the only
  format such a model can be said to follow.
* :func:`user_turn`: one text as the user's turn (how a plain prompt reaches an instruct model,
  which answers raw text with an immediate end of sequence or with loops).
* :func:`encode`: the token ids of a rendered prompt (special tokens in the text, such as
  ``<|im_start|>``, are read as the tokens they name).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def has_template(tokenizer: Any) -> bool:
    """Whether the tokenizer carries a chat template."""
    return bool(getattr(tokenizer, "chat_template", None))


def chat_enabled(tokenizer: Any, options: Mapping[str, Any]) -> bool:
    """Whether plain prompts are wrapped as a user turn: the model option ``chat`` (default
    true) and a tokenizer with a template."""
    return bool(options.get("chat", True)) and has_template(tokenizer)


def render_messages(tokenizer: Any, messages: Sequence[Mapping[str, str]]) -> str:
    """The chat ``messages`` as the model's prompt text, ending where the assistant answers."""
    if has_template(tokenizer):
        chat = [{"role": str(m["role"]), "content": str(m["content"])} for m in messages]
        return str(tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True))
    return transcript(messages)


def transcript(messages: Sequence[Mapping[str, str]]) -> str:
    """The plain fallback: one ``role: content`` line per message, then ``assistant:``."""
    lines = [f"{m['role']}: {m['content']}" for m in messages]
    return "\n".join([*lines, "assistant:"])


def user_turn(tokenizer: Any, text: str) -> str:
    """``text`` as the user's turn of the model's chat template (the caller checked
    :func:`chat_enabled`)."""
    return render_messages(tokenizer, [{"role": "user", "content": text}])


def encode(tokenizer: Any, text: str) -> list[int]:
    """Token ids of a rendered prompt, as the worker prefills them."""
    return list(tokenizer(text).input_ids)
