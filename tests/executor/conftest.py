"""Shared fixtures: tiny models built once per session, one executor per test module."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from control import clock
from control.executor import sources
from control.executor.host import ExecutorConfig, LocalExecutor
from control.executor.protocol import ItemCompleted

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory) -> Path:
    """A cache folder with the tiny models already built (workers then only load them)."""
    cache = tmp_path_factory.mktemp("models")
    for arch in ("gpt2", "bert", "bert-cls"):
        sources.ensure_tiny(arch, cache)
    return cache


def make_executor(cache: Path, **overrides) -> LocalExecutor:
    cfg = dict(heartbeat_s=0.4, cache_dir=str(cache), cpu_slots=2, use_cuda=False)
    cfg.update(overrides)
    ex = LocalExecutor(ExecutorConfig(**cfg))
    ex.start()
    assert ex.wait_ready(90), "workers did not start"
    return ex


def wait_for(ex: LocalExecutor, predicate, timeout: float = 30.0) -> list:
    """Poll events until ``predicate(events_so_far)`` holds; returns all events seen."""
    seen: list = []
    deadline = clock.monotonic() + timeout
    while clock.monotonic() < deadline:
        event = ex.poll(0.1)
        if event is not None:
            seen.append(event)
            if predicate(seen):
                return seen
    raise AssertionError(f"timed out; saw {seen!r}")


def completions(events: list) -> dict:
    return {e.result.idempotency_key: e.result for e in events if isinstance(e, ItemCompleted)}


def all_done(keys):
    keys = set(keys)
    return lambda seen: keys <= set(completions(seen))
