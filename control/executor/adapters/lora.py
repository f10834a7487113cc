"""LoRA adapters on a generate replica: loaded on demand with PEFT, at most N kept (LRU).

One replica serves many tenants' adapters of its base model. :class:`LoraSlots` wraps the base
model in a ``peft.PeftModel`` the first time an adapter is asked for, loads each adapter folder
(PEFT format, ``adapter_config.json`` + weights) under its own name, and evicts the least
recently used adapter not in use when more than ``max_adapters`` would be held.

Batches mix adapters: every forward passes PEFT's ``adapter_names`` (one per batch row,
``"__base__"`` for a row without adapter), PEFT's mixed-adapter batch inference. Chosen over
batching by adapter because the generate loop merges batches continuously: rows of different
adapters then share one forward of the base weights (the dominant cost on a CPU and for small
batches on a GPU), and only each adapter's low-rank product is computed for its own rows.

Once wrapped, the base model's LoRA layers apply the active adapter to any plain forward, so
every forward goes through :meth:`forward` (which always names each row's adapter).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Collection, Sequence
from typing import Any

import torch

from control.executor.protocol import AdapterRef, ExecutorError

log = logging.getLogger(__name__)

#: PEFT's name for "no adapter" in ``adapter_names``
BASE = "__base__"
DEFAULT_MAX_ADAPTERS = 8
EVICTIONS_KEPT = 64


def max_adapters(options: dict) -> int:
    """The ``max_adapters`` model option: an int >= 1 (absent or None: the default)."""
    value = options.get("max_adapters")
    if value is None:
        return DEFAULT_MAX_ADAPTERS
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ExecutorError(f"generate option 'max_adapters' must be an int >= 1, got {value!r}")
    return value


class LoraSlots:
    """The adapters a replica holds, most recently used last (``held``)."""

    def __init__(self, model: torch.nn.Module, capacity: int) -> None:
        self.base, self.capacity = model, capacity
        self.peft: Any = None  # the PeftModel, from the first adapter on
        self._lru: OrderedDict[str, str] = OrderedDict()  # name -> folder
        self.loads = 0  # adapters loaded since start (a load after an eviction counts again)
        self.evicted: list[str] = []  # the last EVICTIONS_KEPT names, in eviction order

    @property
    def held(self) -> tuple[str, ...]:
        return tuple(self._lru)

    def ensure(self, ref: AdapterRef, busy: Collection[str] = ()) -> str:
        """The PEFT name of ``ref``, loaded now unless held (then marked most recently used).
        After a load, least recently used adapters outside ``busy`` (rows still decoding with
        them) are evicted down to the capacity; with all held adapters busy it loads anyway,
        over capacity, and evicts once they are free. Raises ExecutorError when the folder does
        not load (not PEFT, base mismatch), with nothing held changed."""
        if ref.name in self._lru:
            if self._lru[ref.name] == ref.path:
                self._lru.move_to_end(ref.name)
                self._make_room(set(busy) | {ref.name})  # down to capacity after an overflow
                return ref.name
            self._drop(ref.name)  # re-registered at another folder: load the new weights
        self._load(ref)  # first: the model never holds no adapter (PEFT needs one active)
        self._make_room(set(busy) | {ref.name})
        return ref.name

    def forward(self, names: Sequence[str], **inputs: Any) -> Any:
        """One forward of the model; ``names``: each batch row's adapter (``""``: the base)."""
        if self.peft is None:
            return self.base(**inputs)
        return self.peft(**inputs, adapter_names=[n or BASE for n in names])

    def _make_room(self, busy: set[str]) -> None:
        for name in list(self._lru):
            if len(self._lru) <= self.capacity:
                return
            if name not in busy:
                self._drop(name)
                self.evicted.append(name)
                del self.evicted[:-EVICTIONS_KEPT]  # a long-lived replica keeps a bounded tail

    def _load(self, ref: AdapterRef) -> None:
        from peft import PeftModel

        try:
            if self.peft is None:
                self.peft = PeftModel.from_pretrained(self.base, ref.path, adapter_name=ref.name)
                self.peft.eval()
            else:
                self.peft.load_adapter(ref.path, adapter_name=ref.name, is_trainable=False)
        except Exception as err:  # a bad folder fails its items, not the replica
            raise ExecutorError(
                f"adapter {ref.name!r} at {ref.path!r} did not load: {err}"
            ) from err
        self._lru[ref.name] = ref.path
        self.loads += 1
        log.info("adapter %s loaded (%d held)", ref.name, len(self._lru))

    def _drop(self, name: str) -> None:
        del self._lru[name]
        self.peft.delete_adapter(name)
