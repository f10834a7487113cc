"""The real executor: per-device worker processes running torch/transformers model adapters.

Start with :mod:`control.executor.base` (the interface the live driver uses) and
:class:`control.executor.local.LocalExecutor` (its multi-process implementation).
"""
