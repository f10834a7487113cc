"""``bench/soak.py`` runs end to end (a short run with one worker kill) and prints one JSON
object with the documented keys and types. Its figures are benchmark results, never asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COUNTS = ("requests", "lost", "double_billed", "errors_5xx")
PERCENTS = ("rss_growth_pct", "p99_ms_first_minute", "p99_ms_last_minute")


@pytest.mark.slow
def test_soak_prints_one_json_object_with_its_keys() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "soak.py"), "--minutes", "0.15",
         "--kill-every-s", "4"],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    body = json.loads(done.stdout.strip().splitlines()[-1])
    for name in COUNTS:
        assert isinstance(body[name], int) and body[name] >= 0, (name, body)
    for name in PERCENTS:
        assert body[name] is None or isinstance(body[name], float), (name, body)
    assert body["requests"] > 0
    assert body["workers_killed"] >= 1
