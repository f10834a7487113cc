"""Fixtures of the fault tests: the tiny models' folder is the executor tests' own (one per
session)."""

from tests.executor.conftest import model_cache  # noqa: F401
