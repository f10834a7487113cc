"""Stopping a command a test started, as an operator would: a signal, then its output."""

from __future__ import annotations

import signal
import subprocess


def stop(proc: subprocess.Popen, timeout: float, sig: int = signal.SIGTERM) -> str:
    """Send ``sig`` and wait up to ``timeout`` seconds for ``proc`` to end (killed past it);
    returns what it printed meanwhile (stdout, with stderr when the test merged them)."""
    proc.send_signal(sig)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out or ""
