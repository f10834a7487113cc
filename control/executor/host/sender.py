"""Non-blocking sends to one worker: write at once when the pipe takes it, else queue it for a
thread that writes it into the pipe.

``Connection.send`` pickles the message and writes it into the pipe; it blocks while the pipe is
full (a worker busy with a long batch stops reading only when its own inbox thread stalls, but a
large message or a slow peer can still fill the socket buffer). The executor's public methods
run on the driver's event loop, so a blocked send would delay every other request. The
:class:`PipeSender` takes messages at once and writes them, in order, from a thread of its own.

The pipe may be in non-blocking mode (the host's loop reader puts it there, and the sender's
socket shares that mode: it is a duplicate of the same descriptor): every write is a
non-blocking one, and the thread waits for room in the pipe itself, between the parts of a
frame. A frame is never left half-written: a worker would wait for its rest for ever.

A send that fails (the worker died, the pipe closed) marks the sender broken and drops what is
queued: the host's reader sees the closed pipe and reports the worker's in-flight work as lost, which is
what would have happened to the messages anyway.
"""

from __future__ import annotations

import logging
import os
import select
import socket
import struct
import threading
from collections import deque
from typing import Any

from control.executor.protocol import wire

log = logging.getLogger(__name__)

#: ``Connection.send`` frames longer messages differently; the executor never sends any.
_MAX_FRAME = 0x7FFFFFFF


def frame(msg: tuple) -> bytes:
    """``msg`` as ``Connection.send`` frames it: a 4-byte big-endian length, then the pickle
    of :func:`~control.executor.protocol.wire.encode` (so the worker's ``Connection.recv``
    reads it unchanged)."""
    payload = wire.encode(msg)
    if len(payload) > _MAX_FRAME:
        raise ValueError(f"message of {len(payload)} bytes is too large for one frame")
    return struct.pack("!i", len(payload)) + payload


class PipeSender:
    """Writes messages to ``conn`` in the order given without blocking the caller.

    When nothing is queued the caller writes the frame itself with a non-blocking ``send``
    (no thread hop on the hot path); whatever the pipe does not take at once (it is full) is
    left, in order, to the sender's daemon thread, which writes it with blocking sends.
    """

    def __init__(self, conn: Any, name: str) -> None:
        self._conn = conn
        # A second socket object on a duplicate of the pipe's descriptor, for MSG_DONTWAIT
        # sends (whatever the blocking mode of the pipe, which the reader may change).
        self._sock = socket.socket(fileno=os.dup(conn.fileno()))
        self._cond = threading.Condition()
        self._queue: deque[bytes] = deque()
        self._writing = False  # the thread is in a blocking send: later frames must queue
        self._closed = False
        self.broken = False
        self.sent = 0
        self.handed_off = 0  # frames (or their rest) the thread had to write
        self._thread = threading.Thread(target=self._run, name=f"send-{name}", daemon=True)
        self._thread.start()

    def send(self, msg: tuple) -> bool:
        """Write or queue ``msg``; never blocks. False when closed or the pipe broke."""
        data = frame(msg)
        with self._cond:
            if self._closed or self.broken:
                return False
            if not self._queue and not self._writing:
                try:
                    done = self._sock.send(data, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    done = 0
                except OSError as err:
                    self._break(err)
                    return False
                if done == len(data):
                    self.sent += 1
                    return True
                data = data[done:]
            self._queue.append(data)
            self.handed_off += 1
            self._cond.notify()
        return True

    def pending(self) -> int:
        """Messages queued and not yet written."""
        with self._cond:
            return len(self._queue)

    def close(self, flush_timeout_s: float = 0.0) -> None:
        """Stop taking messages; write what is queued for up to ``flush_timeout_s``, then end."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        if flush_timeout_s > 0 and self._thread is not threading.current_thread():
            self._thread.join(flush_timeout_s)

    def _run(self) -> None:
        try:
            while True:
                with self._cond:
                    while not self._queue and not self._closed:
                        self._cond.wait()
                    if not self._queue:
                        return  # closed and drained
                    data = self._queue.popleft()
                    self._writing = True
                try:
                    self._write_all(data)
                except OSError as err:  # closed or broken pipe
                    with self._cond:
                        self._break(err)
                    return
                with self._cond:
                    self._writing = False
                    self.sent += 1
        finally:
            self._sock.close()

    def _write_all(self, data: bytes) -> None:
        """Write all of ``data``, waiting for room in the pipe between non-blocking writes
        (``sendall`` on a non-blocking descriptor raises half-way, not saying how much went)."""
        view = memoryview(data)
        poller = select.poll()
        poller.register(self._sock.fileno(), select.POLLOUT)
        while view:
            try:
                view = view[self._sock.send(view, socket.MSG_DONTWAIT) :]
            except BlockingIOError:
                poller.poll(1000)  # room, a hang-up (the next send says which) or a retry

    def _break(self, err: BaseException) -> None:
        """The pipe is gone (caller holds the condition): drop what is queued."""
        self.broken = True
        self._queue.clear()
        log.debug("send to worker failed: %s", err)
