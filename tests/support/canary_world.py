"""A live gateway with a canary made to fail, for the live canary test and its benchmark.

The baseline ``tiny-embed:1`` is the tiny BERT embedder. Version 2 is the same model shipped
with a broken configuration: its context is 4 positions (``max_position_embeddings`` and the
position table cut to match), so it loads, and every real text (at least 5 tokens with the
special ones) makes its forward pass raise. That is a model version as an operator might really
register one from a folder (``weights_source`` path, source ``hf``), not a fake.

:func:`canary_gateway` serves the real app (uvicorn on a loopback port) over a migrated SQLite
copy with one CPU worker process; the core judges canaries with ``canary`` (a small sample
count, so a test need not send hundreds of calls).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from control.api.settings import GatewayConfig
from control.core.canary_stats import CanaryConfig
from control.executor import sources
from control.executor.protocol import ModelRef
from control.runtime.live import InitialReplica
from control.wiring.live import serving_core_config
from tests.app.stack import serve_in_thread
from tests.support.live_gateway import live_app, live_world

BASELINE, CANARY = "tiny-embed:1", "tiny-embed:2"
#: the broken version's context: shorter than any text a client sends
BROKEN_CONTEXT = 4


def broken_version(cache: Path, root: Path) -> Path:
    """A copy of the tiny BERT under ``root`` whose context is ``BROKEN_CONTEXT`` positions."""
    import torch  # noqa: F401 - safetensors.torch needs it loaded
    from safetensors.torch import load_file, save_file

    src = sources.ensure_tiny("bert", cache)
    dst = root / "tiny-embed-v2"
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    config = json.loads((dst / "config.json").read_text())
    config["max_position_embeddings"] = BROKEN_CONTEXT
    (dst / "config.json").write_text(json.dumps(config))
    weights = load_file(dst / "model.safetensors")
    cut = {k: v[:BROKEN_CONTEXT].contiguous() if "position_embeddings" in k else v
           for k, v in weights.items()}  # fmt: skip
    save_file(cut, dst / "model.safetensors", metadata={"format": "pt"})
    return dst


def _seed(services: Any) -> str:
    """One CPU device, both versions (active), a tenant; returns the tenant's key."""
    node = services.nodes.create("test", name="local")
    services.devices.create("test", name="cpu:0", node_id=node.id, kind="cpu", memory_mib=2048,
                            precisions=["fp32"], is_real=True)  # fmt: skip
    for key in (BASELINE, CANARY):
        name, version = key.split(":")
        services.models.create("test", name=name, version=version, task="embed",
                               weights_source="declared", weights_location="tiny test model",
                               memory_mib=16, max_batch_size=8, max_batch_tokens=4096)  # fmt: skip
    tenant = services.tenants.create("test", name="acme", weight=1)
    return services.api_keys.create_key("test", tenant.id).plaintext


@dataclass(frozen=True)
class CanaryGateway:
    url: str
    tenant_key: str
    runtime: Any


@contextmanager
def canary_gateway(
    root: Path, template: Path, admin_token: str, canary: CanaryConfig, healthy: bool = False
) -> Iterator[CanaryGateway]:
    """The served gateway (the baseline loaded on cpu:0, the canary version registered but not
    loaded; ``healthy``: the canary is the baseline's own model, not the broken copy); stopped
    on exit. The worker finds the broken folder through
    ``LEGATO_MODEL_SOURCE_ROOTS`` (set for the worker process it spawns, restored after)."""
    world = live_world(root, template, archs=("bert",))
    broken = broken_version(world.cache, root)
    refs = {BASELINE: ModelRef(BASELINE, "embed", "tiny", "bert"),
            CANARY: ModelRef(CANARY, "embed", "hf", str(broken))}  # fmt: skip
    if healthy:
        refs[CANARY] = ModelRef(CANARY, "embed", "tiny", "bert")
    key = _seed(world.services)
    before = os.environ.get("LEGATO_MODEL_SOURCE_ROOTS")
    os.environ["LEGATO_MODEL_SOURCE_ROOTS"] = str(root)
    try:
        app = live_app(world, refs, GatewayConfig(admin_token=admin_token, sync_timeout_s=60),
                       memory_mib=2048, placement=[InitialReplica(BASELINE, "cpu:0")],
                       start_with_app=True,
                       core_config=replace(serving_core_config(), canary=canary))  # fmt: skip
        served = serve_in_thread(app)
        try:
            yield CanaryGateway(served.url, key, app.state.gateway.inference.runtime)
        finally:
            served.stop()
    finally:
        if before is None:
            os.environ.pop("LEGATO_MODEL_SOURCE_ROOTS", None)
        else:
            os.environ["LEGATO_MODEL_SOURCE_ROOTS"] = before
