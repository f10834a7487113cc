"""Registered trace files are confined to the trace roots (issue 22, item 6), like model
folders: a path outside them, or a symlink inside them leading outside, is refused with a
ValidationError (the API's 422) naming ``path`` and the roots; nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from control.config import Settings
from control.services import Services
from control.services.analysis import SHIPPED_TRACES_DIR, trace_roots
from control.services.errors import ValidationError

ACTOR = "test"


def _trace(path: str) -> dict:
    return {"name": f"t-{abs(hash(path))}", "format": "mooncake", "path": path, "num_rows": 1}


def test_default_roots_are_the_var_dir_and_the_shipped_traces(tmp_path: Path) -> None:
    roots = trace_roots(Settings(var_dir=tmp_path))
    assert roots == [tmp_path, SHIPPED_TRACES_DIR] and SHIPPED_TRACES_DIR.is_dir()
    assert trace_roots(Settings(var_dir=tmp_path, trace_roots=[tmp_path / "x"])) == [tmp_path / "x"]


@pytest.mark.parametrize("path", ["/etc/passwd", "../../../../etc/passwd", "/tmp/../etc"])
def test_a_trace_outside_the_roots_is_refused(services: Services, tmp_path: Path, path) -> None:
    services.traces.confine_to([tmp_path])
    with pytest.raises(ValidationError, match="trace roots") as caught:
        services.traces.create(ACTOR, **_trace(path))
    assert caught.value.field == "path" and str(tmp_path.resolve()) in caught.value.message
    assert services.traces.list() == []


def test_a_symlink_leading_outside_is_refused(services: Services, tmp_path: Path) -> None:
    inside = tmp_path / "root"
    inside.mkdir()
    (inside / "sneaky.jsonl").symlink_to("/etc/passwd")
    services.traces.confine_to([inside])
    with pytest.raises(ValidationError, match="/etc/passwd"):
        services.traces.create(ACTOR, **_trace(str(inside / "sneaky.jsonl")))


def test_a_trace_under_a_root_is_registered(services: Services, tmp_path: Path) -> None:
    services.traces.confine_to([tmp_path])
    row = services.traces.create(ACTOR, **_trace(str(tmp_path / "ok.jsonl")))
    assert row.path == str(tmp_path / "ok.jsonl")
