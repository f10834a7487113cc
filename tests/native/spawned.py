"""A spawned process's body for ``tests/native``: it imports the core at the top, as the what-if
and fidelity workers' modules do, and reports which core it got."""

from __future__ import annotations

import json
from pathlib import Path

import control.core.engine as engine
from control import native


@native.entry_point
def report(path: str) -> None:
    """Write what this process runs to ``path`` (JSON)."""
    state = {"installed": native._state["installed"], "active": native.active()}
    Path(path).write_text(json.dumps(state | {"engine": engine.__file__}))
