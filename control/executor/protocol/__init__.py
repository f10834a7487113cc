"""The executor's protocol: the values every side shares and the :class:`Executor` Protocol.

One import place for the live runtime, the services, the twin and both sides of a backend:
``from control.executor.protocol import Batch, ItemResult, Executor``. What a caller sends is
in :mod:`.work`, what comes back in :mod:`.reports`, the methods a backend implements in
:mod:`.executor`, and the messages the host and a worker process exchange in :mod:`.wire`.
"""

from control.executor.protocol.executor import Executor
from control.executor.protocol.reports import (
    FAILURE_CAUSES,
    REPLICA_FAULTS,
    BreakerChanged,
    DeviceJoined,
    EventListener,
    ExecutorEvent,
    ItemCompleted,
    ItemResult,
    LoadReport,
    ReplicaEvicted,
    RunningBatch,
    TokenDelta,
    WorkerDown,
    WorkerStatus,
    WorkerUp,
)
from control.executor.protocol.work import (
    SOURCE_KINDS,
    TASKS,
    AdapterRef,
    Batch,
    BatchItem,
    DeviceInfo,
    ExecutorError,
    GenParams,
    InputRef,
    ModelRef,
    StepKey,
)

__all__ = [
    "FAILURE_CAUSES",
    "REPLICA_FAULTS",
    "SOURCE_KINDS",
    "TASKS",
    "Batch",
    "AdapterRef",
    "BatchItem",
    "BreakerChanged",
    "DeviceInfo",
    "DeviceJoined",
    "EventListener",
    "Executor",
    "ExecutorError",
    "ExecutorEvent",
    "GenParams",
    "InputRef",
    "ItemCompleted",
    "ItemResult",
    "LoadReport",
    "ModelRef",
    "ReplicaEvicted",
    "RunningBatch",
    "StepKey",
    "TokenDelta",
    "WorkerDown",
    "WorkerStatus",
    "WorkerUp",
]
