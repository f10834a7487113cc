"""A run's LoRA adapter on its way from the gateway to the core and the executor.

The gateway resolves the run's ``adapter`` (a name of the tenant's) to the adapter's identity on
replicas, its folder, its base model and its load time, and puts them under :data:`LORA` in the
run's ``sampling`` (the settings of the run's generate steps, recorded with the request, so a
resumed run keeps its adapter). Here they become the core request's adapter fields and, for
each item the core dispatched with the adapter, the executor item's :class:`AdapterRef`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from control.core.types import Request
from control.executor.protocol import AdapterRef

#: the key of ``sampling`` holding the run's adapter: {"name", "path", "model", "load_s",
#: "adapter"} (``name``: its identity on replicas; ``adapter``: the tenant's name, billed)
LORA = "lora"


def with_adapter(request: Request, sampling: Mapping[str, Any] | None) -> Request:
    """``request`` with the run's adapter fields set (unchanged without an adapter)."""
    lora = (sampling or {}).get(LORA)
    if not lora:
        return request
    return replace(
        request, adapter=str(lora["name"]), adapter_model=str(lora["model"]),
        adapter_load_s=float(lora.get("load_s") or 0.0),
    )  # fmt: skip


def adapter_ref(sampling: Mapping[str, Any] | None, adapter: str) -> AdapterRef | None:
    """The executor's reference to ``adapter``, the adapter the core gave a dispatched item
    (``BatchItem.adapter``; "" none): its name on replicas and the run's folder."""
    lora = (sampling or {}).get(LORA)
    if not adapter or not lora:
        return None
    return AdapterRef(adapter, str(lora["path"]))


def billed_name(sampling: Mapping[str, Any] | None) -> str | None:
    """The adapter's name as its tenant knows it (the usage ledger's ``adapter``)."""
    lora = (sampling or {}).get(LORA)
    return str(lora.get("adapter") or lora["name"]) if lora else None
