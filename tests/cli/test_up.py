"""`legato up`: secrets are made once and kept private, and the whole stack comes up."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys

import pytest

from control.commands.up import ensure_secret


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_secret_is_created_once_and_private(tmp_path) -> None:
    first = ensure_secret(tmp_path / "var", "admin_token")
    assert len(first) >= 32
    mode = stat.S_IMODE(os.stat(tmp_path / "var" / "admin_token").st_mode)
    assert mode == 0o600
    assert ensure_secret(tmp_path / "var", "admin_token") == first


@pytest.mark.slow
def test_up_starts_api_console_and_load_then_stops(tmp_path) -> None:
    """The real command: migrate, seed, issue demo keys, start API (with the real executor and
    models), console and demo load, wait until each answers, stop cleanly."""
    env = dict(os.environ)
    for var in ("LEGATO_ADMIN_TOKEN", "LEGATO_KEY_PEPPER", "LEGATO_DATABASE_URL"):
        env.pop(var, None)
    env.update(
        LEGATO_VAR_DIR=str(tmp_path / "var"),
        LEGATO_API_PORT=str(_free_port()),
        LEGATO_CONSOLE_PORT=str(_free_port()),
        HF_HUB_OFFLINE="1",
    )
    result = subprocess.run(
        [sys.executable, "-m", "control.cli", "up", "--exit-when-ready"],
        env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "legato is up" in result.stdout
    assert "/?ticket=" in result.stdout  # a one-time sign-in link to the console
    keys = json.loads((tmp_path / "var" / "demo_keys.json").read_text())
    assert set(keys) == {"acme", "globex", "initech"}
    assert all(k.startswith("lg_") for k in keys.values())
    assert stat.S_IMODE(os.stat(tmp_path / "var" / "demo_keys.json").st_mode) == 0o600
