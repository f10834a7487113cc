"""Workflow DAGs: spec (from a dict), validation, and the per-run state machine."""
