"""Scheduling priority of the live side: the check measures the serving stack, not its
neighbours.

On a machine shared with other work (the 2-core development box runs other jobs beside the
check), CPU-bound neighbours that land on the worker's core take half of it or more for seconds
at a time: the worker's batches then run up to 2-3x slower in stretches that no table measured
before or after the slice describes (the in-worker device times of one slice moved between
0.46x and 1.2x of the table here). Raising the priority of the check's own threads (the
worker's and the driver's) makes the scheduler run them first whenever they are runnable, so
the live side runs at the speed its profile measured; neighbours use the idle time between
batches. It needs the right to raise priorities (root or CAP_SYS_NICE); without it nothing
changes and the result says so (``nice`` is None).

Linux keeps a nice value per thread, and threads started later (and child processes) inherit
their creator's value. With autogroup scheduling (``kernel.sched_autogroup_enabled``) the CPU is
first shared between sessions and a thread's nice only weighs within its session, so the
session's group is raised too (``/proc/<pid>/autogroup``) and put back afterwards.
"""

from __future__ import annotations

import os
from pathlib import Path


def threads_of(pid: int) -> list[int]:
    """Thread ids of ``pid`` (just ``pid`` where /proc does not list them)."""
    task = Path(f"/proc/{pid}/task")
    try:
        return sorted(int(p.name) for p in task.iterdir() if p.name.isdigit())
    except OSError:
        return [pid]


def _autogroup_nice(pid: int) -> int | None:
    """The nice value of ``pid``'s autogroup (None without autogroups)."""
    try:
        text = Path(f"/proc/{pid}/autogroup").read_text()  # "/autogroup-123 nice 0"
        return int(text.split("nice")[1])
    except (OSError, IndexError, ValueError):
        return None


class Priority:
    """Raises processes to ``nice`` (all their threads, and their autogroup) and puts every
    value back on ``restore``. ``applied`` is False when this process may not raise
    priorities: nothing is changed then (what was set before the refusal is put back)."""

    def __init__(self, nice: int) -> None:
        self.nice = nice
        self.applied = hasattr(os, "setpriority")
        self._threads: dict[int, int] = {}
        self._groups: dict[int, int] = {}  # a pid of the group -> the group's previous nice

    def raise_(self, pid: int) -> bool:
        """Raise every thread of ``pid`` and its autogroup; False (and all undone) if refused."""
        if not self.applied:
            return False
        try:
            for tid in threads_of(pid):
                try:
                    self._threads.setdefault(tid, os.getpriority(os.PRIO_PROCESS, tid))
                    os.setpriority(os.PRIO_PROCESS, tid, self.nice)
                except ProcessLookupError:
                    continue  # a thread that ended meanwhile
            group = _autogroup_nice(pid)
            if group is not None and group > self.nice:
                Path(f"/proc/{pid}/autogroup").write_text(str(self.nice))
                self._groups[pid] = group
        except PermissionError:
            self.restore()
            self.applied = False
        return self.applied

    def restore(self) -> None:
        """Put back every value changed (ended threads and processes are skipped)."""
        for tid, value in self._threads.items():
            try:
                os.setpriority(os.PRIO_PROCESS, tid, value)
            except (ProcessLookupError, PermissionError):
                continue
        for pid, value in self._groups.items():
            try:
                Path(f"/proc/{pid}/autogroup").write_text(str(value))
            except OSError:
                continue
        self._threads.clear()
        self._groups.clear()


def schedstat(pid: int) -> tuple[float, float] | None:
    """(ms run on a CPU, ms waited runnable for one) by ``pid``'s main thread so far, from
    ``/proc/<pid>/schedstat``; None where the kernel does not keep it. The wait over a phase
    says how much of its slowdown was the scheduler's (neighbours ran instead of the worker)
    rather than the core's speed."""
    try:
        run_ns, wait_ns, *_ = Path(f"/proc/{pid}/schedstat").read_text().split()
        return int(run_ns) / 1e6, int(wait_ns) / 1e6
    except (OSError, ValueError):
        return None
