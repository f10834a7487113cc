"""A bounded memory of the keys seen lately, for duplicate checks that must not grow with the
life of the process (the core's request ids, the runtime's billed step keys).

:class:`RecentKeys` remembers each key for ``horizon`` seconds of the caller's clock (core time
in the core: the ``now`` its drivers pass in; it reads no clock), or for as long as the key's
owner is still held (``keep``), whichever is longer. Keys are kept in the order they were
added, which is time order, so forgetting pops from the front: O(1) amortized per key, and
memory bounded by the rate of new keys times the horizon, plus the keys whose owners are held.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable


class RecentKeys:
    """Keys added within the last ``horizon`` (a duplicate inside it is always found), and any
    older key whose owner ``keep(owner)`` still holds (it is then kept as if added at the
    prune). ``owner`` defaults to the key itself. Callers pass a ``now`` that does not go back."""

    def __init__(self, horizon: float, keep: Callable[[str], bool] | None = None) -> None:
        if not horizon > 0:
            raise ValueError(f"RecentKeys.horizon must be > 0, got {horizon!r}")
        self.horizon = horizon
        self._keep = keep
        self._at: OrderedDict[str, tuple[float, str]] = OrderedDict()  # key -> (added, owner)

    def __contains__(self, key: object) -> bool:
        return key in self._at

    def __len__(self) -> int:
        return len(self._at)

    def add(self, key: str, now: float, owner: str | None = None) -> None:
        """Remember ``key`` from ``now`` on (again, if it was already), then forget what is
        past the horizon."""
        at = self._at
        if key in at:
            at.move_to_end(key)
        at[key] = (now, key if owner is None else owner)
        self.prune(now)

    def prune(self, now: float) -> None:
        """Forget every key added more than ``horizon`` before ``now`` whose owner is not
        held; a held one moves to the back, its time reset to ``now``."""
        at, keep = self._at, self._keep
        cutoff = now - self.horizon
        while at:
            key = next(iter(at))
            added, owner = at[key]
            if added >= cutoff:
                return
            if keep is not None and keep(owner):
                at.move_to_end(key)
                at[key] = (now, owner)
            else:
                del at[key]
