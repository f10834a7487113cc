"""The entry point of a worker process and its configuration (what the host needs to spawn one).

The host starts :func:`worker_main` with the ``spawn`` context (CUDA cannot fork; a fresh
interpreter also keeps a crash contained). Importing this module is cheap: torch, transformers
and the adapters are imported by the worker process only, inside :func:`worker_main`.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from typing import Any

from control.executor.protocol import DeviceInfo


@dataclass(frozen=True)
class WorkerConfig:
    heartbeat_s: float = 0.5  # interval between heartbeats; the host judges it hung after ExecutorConfig.missed_heartbeats
    cache_dir: str = "var/models"  # converted and tiny models are kept here
    torch_threads: int = 1  # torch threads in this worker (1: predictable CPU latency)
    max_held_outputs: int = 10_000  # outputs kept for later steps before the oldest are dropped


def worker_main(device: DeviceInfo, conn: Any, config: WorkerConfig) -> None:
    """Entry point of the worker process; returns when told to stop or the pipe closes.

    The worker times batches and loads with the system clock: a clock object of the host would
    mean nothing in another process (tests that want a clock of theirs run a
    :class:`~control.executor.worker.process.Worker` in their own process and give it one).
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    # Ctrl-C in a terminal reaches the whole process group: the host, not the worker, decides
    # when a worker stops (it sends "stop", or kills a hung one).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if device.cpu_core is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {device.cpu_core})
    import torch
    import transformers

    torch.set_num_threads(config.torch_threads)
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    # Import the adapters (transformers model classes, tokenizers) now, inside the start-up
    # grace period: imported later by the loader thread, they hold the import lock and the
    # GIL in long stretches (loading extension modules), which on a loaded machine starved
    # the heartbeat thread past two intervals and got a healthy worker killed as hung.
    import control.executor.adapters  # noqa: F401
    from control.executor.heap import freeze_heap
    from control.executor.worker.process import Worker

    freeze_heap()  # the worker's libraries stay out of full collections (control.executor.heap)
    Worker(device, conn, config).serve()
