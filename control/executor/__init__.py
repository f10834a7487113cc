"""The real executor: devices running model steps behind one Protocol.

* :mod:`.protocol`: what every side shares: the values a caller sends and gets back, the
  events, the :class:`~control.executor.protocol.Executor` Protocol (what the live runtime may
  ask of any backend) and the messages between a host and its worker processes. The twin
  imports its values from here;
* :mod:`.host`: the local backend's parent-process side,
  :class:`~control.executor.host.local.LocalExecutor`, built from components with their own
  state (workers and health, replicas, dispatch, outputs and transfers, the one pipe reader);
* :mod:`.worker`: what runs inside a worker process (serve loop, inbox, batches, heartbeats);
* :mod:`.adapters`: the torch/transformers model adapters, shared by every process that runs a
  model (:mod:`.sources` finds their weights; :mod:`.profile` measures them in-process);
* :mod:`.heap` and :mod:`.router_rules`: small helpers of serving processes, also used by the
  runtime.
"""
