"""Alembic migration environment of the control-plane schema (shipped with the package)."""
