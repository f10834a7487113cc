"""The concrete live parts satisfy the Protocols the API and the services type them by
(``control/api/ports.py``, ``control/services/ports.py``): every member is there, and every
method takes the parameters the Protocol names, in its order."""

from __future__ import annotations

import inspect

import pytest

from control.api import ports as api_ports
from control.api.twin import TwinEngine
from control.core.assembly import CoreBlueprint
from control.runtime.live import LiveRuntime
from control.services import ports as service_ports
from control.services.inference import InferenceService
from control.services.live_config import LiveConfigFeed
from control.services.rollout_record import RolloutRecorder


@pytest.fixture
def parts(stack):
    """Each concrete part, built as the wiring builds it (nothing started)."""
    recorder = RolloutRecorder(stack.factory, stack.services.plans)
    runtime = LiveRuntime(CoreBlueprint((), (), ()), None, None, {}, (),  # type: ignore[arg-type]
                          on_rollout=recorder.record_transition)  # fmt: skip
    inference = InferenceService(stack.services, runtime, stack.factory, model_ids={},
                                 device_ids={})  # fmt: skip
    return {
        "runtime": runtime,
        "inference": inference,
        "writer": inference.writer,
        "live_config": LiveConfigFeed(stack.factory, inference),
        "twin": TwinEngine(stack.factory, "sqlite://"),
    }


CASES = [
    ("runtime", service_ports.RolloutRuntime),
    ("runtime", service_ports.ConfigurableRuntime),
    ("runtime", api_ports.GatewayRuntime),
    ("writer", service_ports.DbThread),
    ("inference", service_ports.FeedTarget),
    ("inference", api_ports.Inference),
    ("live_config", api_ports.LiveConfig),
    ("twin", api_ports.WhatIfEngine),
    ("twin", api_ports.ScenarioPreparer),
]


def _methods(protocol: type) -> dict[str, inspect.Signature]:
    found = {}
    for klass in protocol.__mro__:
        for name, member in vars(klass).items():
            if callable(member) and not name.startswith("_"):
                found.setdefault(name, inspect.signature(member))
    return found


@pytest.mark.parametrize(("part", "protocol"), CASES, ids=lambda c: getattr(c, "__name__", c))
def test_concrete_part_satisfies_its_protocol(parts, part, protocol):
    obj = parts[part]
    assert isinstance(obj, protocol), f"{type(obj).__name__} lacks a member of {protocol}"
    for name, wanted in _methods(protocol).items():
        have = inspect.signature(getattr(obj, name))
        params = [p for p in wanted.parameters if p != "self"]
        assert list(have.parameters)[: len(params)] == params, (name, have, wanted)
        coroutine = inspect.iscoroutinefunction(getattr(protocol, name))
        assert inspect.iscoroutinefunction(getattr(obj, name)) == coroutine, name
