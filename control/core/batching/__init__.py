"""Dynamic batching policies for per-replica local queues."""
