"""The model references executor tests load, on either executor (tiny random models built
locally, and the no-op tool in the modes tests use to make a replica hang or fail)."""

from __future__ import annotations

from control.executor.protocol import ModelRef

GPT2 = ModelRef("tiny-gpt2", "generate", "tiny", "gpt2")
BERT = ModelRef("tiny-bert", "embed", "tiny", "bert")
NOOP = ModelRef("noop", "noop", "tool")
# A replica whose steps hold the worker's main thread without ticking, like one long forward
# pass of an encoder (or a truly hung step, when it holds it long enough).
SILENT = ModelRef("noop-silent", "noop", "tool", options={"tick": False})
# A replica whose every batch raises: a fault of the replica itself, whatever its inputs.
BROKEN = ModelRef("noop-broken", "noop", "tool", options={"fail": "the model is broken"})
