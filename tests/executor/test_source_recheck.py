"""The worker rechecks a local model folder against the model source roots when it loads it
(issue 22, item 6): a ``hf`` model row written straight to the database, past the gateway's
check, must not make a worker load ``/etc`` or follow a symlink out of the roots."""

from __future__ import annotations

from pathlib import Path

import pytest

from control.config import get_settings
from control.executor import sources
from control.executor.protocol import ExecutorError, ModelRef


@pytest.fixture(autouse=True)
def _fresh_settings():
    """Settings are read once a process; each test sets its own environment."""
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def _ref(path: Path | str) -> ModelRef:
    return ModelRef("m:1", "embed", "hf", str(path))


@pytest.fixture
def roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "models"
    root.mkdir()
    monkeypatch.setenv("LEGATO_MODEL_SOURCE_ROOTS", str(root))
    return root


def test_a_folder_outside_the_roots_is_refused_at_load(roots: Path) -> None:
    with pytest.raises(ExecutorError, match="outside the model source roots"):
        sources.resolve(_ref("/etc"))
    with pytest.raises(ExecutorError, match="outside"):
        sources.resolve(_ref(roots / ".." / ".." / ".." / "etc"))


def test_a_symlink_out_of_the_roots_is_refused(roots: Path) -> None:
    (roots / "sneaky").symlink_to("/etc", target_is_directory=True)
    with pytest.raises(ExecutorError, match="resolves to /etc"):
        sources.resolve(_ref(roots / "sneaky"))


def test_a_folder_under_the_roots_loads(roots: Path) -> None:
    (roots / "ok").mkdir()
    assert sources.resolve(_ref(roots / "ok")) == (roots / "ok").resolve()


def test_the_default_roots_are_the_var_dir_and_packages(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.delenv("LEGATO_MODEL_SOURCE_ROOTS", raising=False)
    monkeypatch.setenv("LEGATO_VAR_DIR", str(tmp_path))
    assert sources.source_roots()[0] == tmp_path
