"""The LocalExecutor implements the executor Protocol method for method (names, parameters and
their kinds), so that what the runtime calls is exactly what a second backend must offer."""

from __future__ import annotations

import inspect

from control.executor.host import LocalExecutor
from control.executor.protocol import Executor


def _methods(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in vars(cls).items()
        if callable(member) and not name.startswith("_")
    }


def test_the_local_executor_has_every_protocol_method_with_its_parameters() -> None:
    wanted = _methods(Executor)
    assert {"start", "stop", "submit", "cancel", "load", "events", "poll"} <= set(wanted)
    for name, signature in wanted.items():
        found = inspect.signature(getattr(LocalExecutor, name))
        shape = [(p.name, p.kind) for p in signature.parameters.values()]
        assert [(p.name, p.kind) for p in found.parameters.values()] == shape, name
