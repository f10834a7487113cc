"""The Ray backend of the executor: one Ray actor per device across a cluster.

The actors run the local workers' model code (adapters and batch runner); only the process
around it differs. Importing this package imports ray: only the wiring imports it, when
settings select it (``LEGATO_EXECUTOR=ray``).
"""

from control.executor.ray.cluster import RaySettings
from control.executor.ray.config import RayExecutorConfig
from control.executor.ray.executor import RayExecutor

__all__ = ["RayExecutor", "RayExecutorConfig", "RaySettings"]
