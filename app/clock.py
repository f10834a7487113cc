"""The console's one reader of the wall clock (sign-in lifetimes, one-time links).

The control plane's rule (read the clock only in ``control/clock.py``) cannot reach the console,
which may import nothing of the control plane: this module is its counterpart here, and the
only place in ``app/`` that reads the clock.
"""

from __future__ import annotations

import time


def now() -> float:
    """Seconds since the epoch (a sign-in's start and end, a link's issue time compare to it)."""
    return time.time()  # noqa: TID251 - the console's counterpart of control/clock.py
