"""Exceptions raised for misuse of the orchestration core.

Expected outcomes (a refused request, a model with no room to load) are returned as actions with
reasons; these exceptions are for callers that break the contract, and each names the bad value.
"""

from __future__ import annotations


class CoreError(Exception):
    """Base class of every misuse error raised by ``control.core`` (outside tenancy)."""


class UnknownModelError(CoreError, KeyError):
    def __init__(self, model_key: str) -> None:
        super().__init__(f"unknown model {model_key!r}: register it with ModelRegistered first")
        self.model_key = model_key


class UnknownReplicaError(CoreError, KeyError):
    def __init__(self, replica_id: str) -> None:
        super().__init__(f"unknown replica {replica_id!r}")
        self.replica_id = replica_id


class UnknownDeviceError(CoreError, KeyError):
    def __init__(self, device_id: str) -> None:
        super().__init__(f"unknown device {device_id!r}: announce it with DeviceUp first")
        self.device_id = device_id


class UnplaceableGroupError(CoreError, ValueError):
    """A placement target names a tensor-parallel group that cannot be held
    (:mod:`control.core.tp_groups`); ``reason`` says why, naming the degree and the domains."""

    def __init__(self, model_key: str, reason: str) -> None:
        super().__init__(f"{model_key}: {reason}")
        self.model_key = model_key
        self.reason = reason


class UnknownBatchError(CoreError, KeyError):
    def __init__(self, batch_id: str) -> None:
        super().__init__(f"completion for unknown batch {batch_id!r}")
        self.batch_id = batch_id


class DuplicateRequestError(CoreError, ValueError):
    def __init__(self, request_id: str) -> None:
        super().__init__(f"request_id {request_id!r} was already submitted")
        self.request_id = request_id


class InvalidWorkflowError(CoreError, ValueError):
    """A workflow spec failed validation; ``problems`` lists every problem found."""

    def __init__(self, workflow: str, problems: tuple[object, ...]) -> None:
        lines = "; ".join(str(p) for p in problems)
        super().__init__(f"workflow {workflow!r} is invalid: {lines}")
        self.workflow = workflow
        self.problems = problems


class UnknownEventError(CoreError, TypeError):
    def __init__(self, event: object) -> None:
        super().__init__(f"ingest() got an unknown event type {type(event).__name__}")


class UnknownWorkflowError(CoreError, KeyError):
    def __init__(self, workflow: str) -> None:
        super().__init__(
            f"unknown workflow {workflow!r}: register it with WorkflowRegistered first"
        )
        self.workflow = workflow


class TimeWentBackwardsError(CoreError, ValueError):
    def __init__(self, now: float, last: float) -> None:
        super().__init__(f"now={now} is before the last step's now={last}")


class InvalidCanaryError(CoreError, ValueError):
    """A ``CanaryChanged`` the core cannot apply; ``field`` names the bad part."""

    def __init__(self, field: str, value: object, why: str) -> None:
        super().__init__(f"{field}={value!r}: {why}")
        self.field = field
        self.value = value
