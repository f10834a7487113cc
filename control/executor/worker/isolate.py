"""Which item of a batch that raised is to blame: one tenant's bad input must fail only that
item, never the other tenants' items of the same batch.

Adapters refuse unusable inputs per item (a missing input, a wrong type, text that cannot be
encoded, a prompt longer than the model's context: the item's ``bad_input``). Should a batch
still raise (an input no check foresaw), :func:`isolate` runs its items again one by one: an
item that raises alone while another succeeds, or whose error is about its input
(:func:`input_fault`), fails as ``bad_input``; the others succeed. Only when every item fails
alone for another reason is the failure the replica's (the batch fails, ``model_error``,
retriable). Good batches pay nothing for this: it runs only after a batch raised. The items
run again within the batch's hang deadline, whose floor (30 s by default) covers it.
"""

from __future__ import annotations

import logging
from typing import Any

from control.executor.adapters.base import InputError, ItemOutput, PreparedItem

log = logging.getLogger(__name__)


def isolate(adapter: Any, items: list[PreparedItem], ctx: Any, batch_id: str) -> list[ItemOutput]:
    """The adapter's outputs for ``items``; when the batch raises, each item's outcome alone
    (see the module docstring). Raises when the failure is the replica's."""
    try:
        return adapter.run(items, ctx)
    except Exception as err:
        if len(items) == 1:
            if input_fault(err, items[0]):
                return [_bad(err, items[0])]
            raise
        log.warning("batch %s raised %s; running its %d items one by one", batch_id,
                    type(err).__name__, len(items))  # fmt: skip
    alone: list[ItemOutput | Exception] = []
    for p in items:
        try:
            alone.extend(adapter.run([p], ctx))
        except Exception as err:
            alone.append(err)
    pairs = list(zip(items, alone, strict=True))
    failures = [(p, a) for p, a in pairs if isinstance(a, Exception)]
    replica = [a for p, a in failures if not input_fault(a, p)]
    if len(failures) == len(items) and replica:
        raise replica[0]  # nothing runs, not even alone: the replica's fault
    return [_bad(a, p) if isinstance(a, Exception) else a for p, a in pairs]


def input_fault(err: Exception, item: PreparedItem) -> bool:
    """Whether ``err`` of ``item`` run alone is about its input, whatever the replica: an
    adapter's InputError, text a tokenizer could not encode or decode, or any error of an item
    holding text that cannot be encoded (tokenizers raise TypeError on a lone surrogate)."""
    return isinstance(err, InputError | UnicodeError) or unencodable(item) is not None


def unencodable(item: PreparedItem) -> str | None:
    """The first input of ``item`` holding text UTF-8 cannot encode (``text``, ``texts[2]``)."""
    for name, value in item.inputs.items():
        many = isinstance(value, list | tuple)
        for i, v in enumerate(value if many else (value,)):
            if isinstance(v, str) and not v.isascii():
                try:
                    v.encode("utf-8")
                except UnicodeEncodeError:
                    return f"{name}[{i}]" if many else name
    return None


def _bad(err: Exception, item: PreparedItem) -> ItemOutput:
    """The ``bad_input`` output of ``item``, that raised ``err`` on its own."""
    if isinstance(err, InputError):
        return ItemOutput(error=printable(str(err)), field=err.field)
    field = unencodable(item)
    what = "input unusable by the model" if field is None else f"input {field!r} is not text"
    return ItemOutput(error=printable(f"{what}: {type(err).__name__}: {err}"), field=field)


def printable(text: str) -> str:
    """``text`` with anything UTF-8 cannot encode escaped: an error message may quote a bad
    input, and it travels on as JSON and into the database."""
    return text if text.isascii() else text.encode("utf-8", "backslashreplace").decode("utf-8")
