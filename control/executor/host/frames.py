"""Messages cut out of the bytes of one worker pipe, however those bytes arrive.

A worker writes each message as ``Connection.send_bytes`` frames it: a 4-byte big-endian
length (``-1`` then an 8-byte length for a message of 2 GiB or more), then the pickle of the
message (:func:`~control.executor.protocol.wire.encode`). The host does not read them with
``Connection.recv``: on a pipe in non-blocking mode (uvloop's ``add_reader`` puts every fd it
watches in that mode, and :class:`~control.executor.host.reader.LoopReader` does so on any
loop) ``recv`` of a message only partly arrived raises ``BlockingIOError`` half-way, after it
has consumed the first part: the message is lost and the stream out of step, and the reader
took that error for a closed pipe (a healthy worker killed as "pipe closed (exit code None)").
On a blocking pipe the same ``recv`` waits for the rest, which stops every other worker's
messages behind one worker that was stopped in the middle of a write.

:class:`FrameBuffer` instead reads whatever is there (never waiting), keeps a message that has
only partly arrived until the rest comes, and hands out only whole messages. Not thread-safe:
one buffer per pipe, used by the pipe's one reader.
"""

from __future__ import annotations

import errno
import logging
import os
import pickle
import select
import struct

log = logging.getLogger(__name__)

_HEADER = struct.Struct("!i")
_LONG = struct.Struct("!Q")

#: bytes asked of the pipe per read, and reads per turn: a turn reads at most 1 MiB of one
#: pipe, so one worker sending a large output cannot hold the reader from the others for long
#: (the rest is read at the next turn; the pipe is still readable).
READ_CHUNK = 64 * 1024
MAX_READS = 16


class CorruptStream(ValueError):
    """The bytes of a pipe are not a sequence of frames: the pipe can no longer be trusted."""


class FrameBuffer:
    __slots__ = ("_buf", "received")

    def __init__(self) -> None:
        self._buf = bytearray()
        self.received = 0  # bytes read from the pipe so far

    def partial(self) -> int:
        """Bytes held of a message that has not fully arrived yet."""
        return len(self._buf)

    def read_from(self, fd: int) -> bool:
        """Read what the pipe holds now, up to :data:`MAX_READS` reads, never waiting for
        more (the first read follows a readiness signal; each later one only if the pipe has
        bytes waiting). Returns True when the pipe is closed (end of stream or a reset);
        ``BlockingIOError`` is only "nothing more yet"."""
        for n in range(MAX_READS):
            if n and not _has_bytes(fd):
                return False
            try:
                data = os.read(fd, READ_CHUNK)
            except BlockingIOError:
                return False
            except OSError as err:
                if err.errno in (errno.ECONNRESET, errno.EPIPE, errno.EBADF):
                    return True
                raise
            if not data:
                return True
            self._buf += data
            self.received += len(data)
            if len(data) < READ_CHUNK:
                return False  # drained for now; more wakes the reader again
        return False

    def feed(self, data: bytes) -> None:
        """Append bytes read elsewhere (tests)."""
        self._buf += data
        self.received += len(data)

    def take(self) -> list[tuple]:
        """Every whole message received, in order, unpickled; the start of a message still
        arriving stays. A message that does not unpickle is logged and skipped (its frame
        said where it ends, so the next one is intact); a frame with an impossible length
        raises :class:`CorruptStream`."""
        buf = self._buf
        out: list[tuple] = []
        at, end = 0, len(buf)
        with memoryview(buf) as view:
            while end - at >= _HEADER.size:
                (size,) = _HEADER.unpack_from(buf, at)
                start = at + _HEADER.size
                if size == -1:
                    if end - start < _LONG.size:
                        break
                    (size,) = _LONG.unpack_from(buf, start)
                    start += _LONG.size
                elif size < 0:
                    where = self.received - end + at
                    raise CorruptStream(f"a frame of length {size} at byte {where} of the pipe")
                if end - start < size:
                    break
                try:
                    out.append(pickle.loads(view[start : start + size]))
                except Exception:  # one bad message must not stop the pipe: logged
                    log.exception("a worker message of %d bytes did not unpickle", size)
                at = start + size
        if at:
            del buf[:at]
        return out


def _has_bytes(fd: int) -> bool:
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))
