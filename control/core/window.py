"""A bounded, compact memory of the keys seen lately, for duplicate checks that must not grow
with the life of the process (the core's request ids, the runtime's billed step keys).

:class:`RecentKeys` remembers each key for ``horizon`` seconds of the caller's clock (core time
in the core: the ``now`` its drivers pass in; it reads no clock), or for as long as the key's
owner is still held (``keep``) and a horizon after, whichever is longer.

It keeps no key strings. A key is its 8-byte blake2b digest (a Python int), and time is cut
into ``buckets`` spans of ``horizon / buckets``: the keys of the span now running sit in a dict
(digest -> owner); when the span ends they are sealed into an ``array('Q')`` of digests, 8
bytes a key, and a sealed span is dropped whole once its last instant is older than the
horizon. The sealed spans are searched through one sorted ``array('Q')`` of all their digests
(one ``bisect``, a few microseconds), rebuilt when a span is sealed or dropped (once a span: a
merge of sorted runs, tens of milliseconds for a quarter million keys). A key is thus
remembered for at least ``horizon`` and at most one span more, and a window full of keys costs
about ``16 + 60 / buckets`` bytes a key (the open span's dict is the dearer part), not the ~330
of a dict of strings with their times.

Two different keys share a digest with probability 2**-64: a lookup among ``n`` keys answers
"seen" for a key never added with probability below ``n * 2**-64`` (under 1e-13 for a million
keys). Each caller says what backs it when that or the forgetting happens.

``cap`` bounds the keys held in sealed spans whatever the rate: past it the oldest span is
dropped early (counted in ``evicted``), so a flood shortens the window instead of growing
memory.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections import deque
from collections.abc import Callable
from hashlib import blake2b
from itertools import chain

#: Sealed keys held at most (8 bytes each: 16 MiB), about 2,200 new keys a second for 900 s.
DEFAULT_CAP = 2_000_000
#: Spans a horizon is cut into: a key outlives the horizon by at most one span (1/16th).
DEFAULT_BUCKETS = 16


def digest(key: str) -> int:
    """The 64-bit digest a key is kept as (stable across processes and runs)."""
    raw = blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(raw, "little")


class RecentKeys:
    """Keys added within the last ``horizon`` (a duplicate inside it is always found), and any
    older key whose owner ``keep(owner)`` still holds (it is then remembered until a horizon
    after its owner is seen released). Callers pass a ``now`` that does not go back."""

    def __init__(
        self,
        horizon: float,
        keep: Callable[[str], bool] | None = None,
        *,
        cap: int = DEFAULT_CAP,
        buckets: int = DEFAULT_BUCKETS,
    ) -> None:
        if not horizon > 0:
            raise ValueError(f"RecentKeys.horizon must be > 0, got {horizon!r}")
        if cap < 1 or buckets < 1:
            raise ValueError(f"RecentKeys needs cap >= 1 and buckets >= 1, got {cap}, {buckets}")
        self.horizon = horizon
        self.cap = cap
        self.span = horizon / buckets
        self.evicted = 0  # keys dropped early by the cap
        self._keep = keep
        self._open: dict[int, str] = {}  # digest -> owner ("" without keep), the open span
        self._open_index = 0  # the open span: [index * span, (index + 1) * span)
        self._sealed: deque[tuple[float, array[int]]] = deque()  # (span end, sorted digests)
        self._sealed_keys = 0
        self._index: array[int] = array("Q")  # every sealed digest, sorted
        self._held: dict[int, str] = {}  # digest -> owner, sealed while its owner was held

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._has(digest(key))

    def __len__(self) -> int:
        return len(self._open) + self._sealed_keys + len(self._held)

    def _has(self, d: int) -> bool:
        if d in self._open or d in self._held:
            return True
        index = self._index
        i = bisect_left(index, d)
        return i < len(index) and index[i] == d

    def add(self, key: str, now: float, owner: str | None = None) -> None:
        """Remember ``key`` from ``now`` on (again, if it was already), then forget what is
        past the horizon."""
        self.prune(now)
        owned = "" if self._keep is None else (key if owner is None else owner)
        self._open[digest(key)] = owned
        if len(self._open) >= self.cap:  # a flood inside one span: sealed early, capped
            self._seal()
            self._reindex()

    def prune(self, now: float) -> None:
        """Seal the open span if ``now`` is past it, and forget every sealed span whose last
        instant is more than ``horizon`` before ``now``."""
        changed = False
        index = int(now // self.span)
        if index > self._open_index:
            changed = self._seal()
            self._open_index = index
        cutoff = now - self.horizon
        sealed = self._sealed
        while sealed and sealed[0][0] <= cutoff:
            self._sealed_keys -= len(sealed.popleft()[1])
            changed = True
        if changed:
            self._reindex()

    def _reindex(self) -> None:
        """Rebuild the sorted index of the sealed spans (a merge of their sorted runs)."""
        self._index = array("Q", sorted(chain.from_iterable(keys for _, keys in self._sealed)))

    def _seal(self) -> bool:
        """Move the open span's keys into a sorted array, those of held owners into ``held``;
        the held keys whose owner is now released start a horizon again in the next span.
        Whether the sealed spans changed."""
        keep, held = self._keep, self._held
        released: dict[int, str] = {}
        if keep is not None:
            for d, owner in list(held.items()):
                if not keep(owner):
                    del held[d]
                    released[d] = ""
        keys: list[int] = []
        for d, owner in self._open.items():
            if keep is not None and keep(owner):
                held[d] = owner
            else:
                keys.append(d)
        self._open = released
        if not keys:
            return False
        keys.sort()
        self._sealed.append(((self._open_index + 1) * self.span, array("Q", keys)))
        self._sealed_keys += len(keys)
        while self._sealed_keys > self.cap and self._sealed:
            dropped = len(self._sealed.popleft()[1])
            self._sealed_keys -= dropped
            self.evicted += dropped
        return True
