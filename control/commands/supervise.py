"""Supervision of the child processes of ``legato up``: started, watched, stopped, never orphaned.

The stop contract, for every way the supervisor can end:

* **SIGTERM, SIGINT, SIGHUP** (systemd, a container runtime, Ctrl-C, a closed terminal): the
  supervisor installs its own handlers for all three while it supervises, explicitly, because a
  shell that starts a job in the background hands it SIGINT *ignored* and Python then keeps it
  ignored (SIGHUP alone stays ignored when it was: ``nohup`` means "outlive the terminal"). A
  signal raises :class:`Stopping` in the main thread and the children are stopped.
* **Stopping** drains first, with a bound: SIGTERM to each child process (its leader only, so
  that a child with helpers of its own, such as ``legato api`` and its executor workers, stops
  them in order), a wait of at most ``drain_s`` for all of them together, then SIGKILL to each
  child's whole process group: a child still running, and anything it left behind in its group
  (a worker that outlived its API), is killed. A second signal while draining cuts the drain
  short (straight to SIGKILL).
* **SIGKILL of the supervisor** (no handler runs): each child asks the kernel, before it
  executes its program, to send it SIGTERM when the supervisor dies (Linux ``prctl
  PR_SET_PDEATHSIG``, set through ctypes in ``preexec_fn``; it survives ``exec``). The child then
  stops as on a plain SIGTERM (``legato api`` stops its workers; workers also end when their
  pipe to the API closes, see :mod:`control.executor.host.workers`). The kernel sends it when the
  *thread* that spawned the child ends, so children are spawned from the main thread only. On
  other systems this last path is not covered.

Each child runs in a session of its own: a Ctrl-C at the terminal reaches only the supervisor,
which stops each child once (a second SIGINT would make uvicorn abort its drain).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from control.clock import monotonic

#: prctl(2) option: the signal a process gets when its parent dies.
PR_SET_PDEATHSIG = 1
#: The signals that stop the supervisor (and with it every child).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Stopping(Exception):
    # A request to stop, not an error: ``up`` catches it and stops in order.
    """A stop signal arrived; ``signame`` says which."""

    def __init__(self, signame: str) -> None:
        super().__init__(f"stopped by {signame}")
        self.signame = signame


class ChildExited(RuntimeError):
    """A child that must keep running exited."""


@functools.cache
def _libc() -> Any | None:
    """libc, loaded in the parent (a forked child must not load libraries); None off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def die_with_parent(parent_pid: int) -> Callable[[], None]:
    """A ``preexec_fn``: have the kernel send SIGTERM to the child when the process
    ``parent_pid`` (the supervisor) dies; if it already died before the request took effect,
    stop at once instead of running orphaned. Also unblocks the stop signals (see spawn)."""
    libc = _libc()

    def preexec() -> None:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        if libc is not None:
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
            if os.getppid() != parent_pid:
                os._exit(1)

    return preexec


@dataclass
class Child:
    name: str
    proc: subprocess.Popen
    #: True when exiting with status 0 is fine (a demo load that finished).
    may_finish: bool = False


@dataclass
class Supervisor:
    """Children started with :meth:`spawn`, watched by :meth:`watch`, stopped by :meth:`stop`.

    Use it as a context manager: entering installs the stop-signal handlers, leaving (however
    the block ends) stops every child and restores the previous handlers."""

    drain_s: float = 20.0
    children: list[Child] = field(default_factory=list)
    _saved: dict[int, Any] = field(default_factory=dict)
    _hurry: bool = False

    def __enter__(self) -> Supervisor:
        for sig in STOP_SIGNALS:
            if sig == signal.SIGHUP and signal.getsignal(sig) == signal.SIG_IGN:
                continue  # started under nohup: meant to outlive its terminal
            self._saved[sig] = signal.signal(sig, self._on_signal)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
        finally:
            for sig, handler in self._saved.items():
                signal.signal(sig, handler)
            self._saved.clear()

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        raise Stopping(signal.Signals(signum).name)

    def _on_signal_while_stopping(self, _signum: int, _frame: FrameType | None) -> None:
        self._hurry = True

    def spawn(
        self, name: str, argv: list[str], env: dict[str, str], *, may_finish: bool = False
    ) -> Child:
        """Start ``argv`` in its own session, set to get SIGTERM when this process dies. Stop
        signals wait while it starts: one arriving between the fork and the bookkeeping would
        otherwise leave a child nobody stops."""
        old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            proc = subprocess.Popen(argv, env=env, start_new_session=True,
                                    preexec_fn=die_with_parent(os.getpid()))  # fmt: skip
            child = Child(name, proc, may_finish)
            self.children.append(child)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
        return child

    def watch(self, poll_s: float = 1.0) -> None:
        """Return never: wait until a child exits (raising :class:`ChildExited`, except for one
        that ``may_finish`` with status 0, which is dropped) or a stop signal (Stopping)."""
        while True:
            for child in list(self.children):
                code = child.proc.poll()
                if code is None:
                    continue
                if child.may_finish and code == 0:
                    self.children.remove(child)
                    continue
                raise ChildExited(f"{child.name} exited with status {code}; stopping the rest")
            if not self.children:
                raise ChildExited("every child has finished")
            try:
                self.children[0].proc.wait(timeout=poll_s)
            except subprocess.TimeoutExpired:
                pass

    def stop(self) -> None:
        """SIGTERM each child (last started first), wait at most ``drain_s`` in all, then
        SIGKILL each child's process group (whatever is left of it). Idempotent."""
        for sig in self._saved:  # a second signal now hurries the drain, never interrupts it
            signal.signal(sig, self._on_signal_while_stopping)
        children, self.children = list(reversed(self.children)), []
        for child in children:
            if child.proc.poll() is None:
                _signal(child.proc.send_signal, signal.SIGTERM)
        deadline = monotonic() + self.drain_s
        while not self._hurry and monotonic() < deadline:
            if all(c.proc.poll() is not None for c in children):
                break
            _pause(children, 0.1)
        for child in children:
            _signal(lambda sig, pid=child.proc.pid: os.killpg(pid, sig), signal.SIGKILL)
            child.proc.wait()


def _signal(send: Callable[[int], None], sig: int) -> None:
    try:
        send(sig)
    except (ProcessLookupError, PermissionError):
        pass  # already gone (a group whose members all ended)


def _pause(children: list[Child], seconds: float) -> None:
    running = [c for c in children if c.proc.poll() is None]
    if running:
        try:
            running[0].proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            pass
