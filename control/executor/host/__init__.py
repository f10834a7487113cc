"""The host side of the local executor: what runs in the driver's (parent) process.

:class:`~control.executor.host.local.LocalExecutor` implements the
:class:`~control.executor.protocol.Executor` Protocol over one worker process per device; it is
composed of the components of this package (see its module docstring). Configured by
:class:`~control.executor.host.config.ExecutorConfig`.
"""

from control.executor.host.config import ExecutorConfig
from control.executor.host.local import LocalExecutor

__all__ = ["ExecutorConfig", "LocalExecutor"]
