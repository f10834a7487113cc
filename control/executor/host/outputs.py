"""Where every completed step's output is: which worker holds it, and the copy that came back
with its result when the step asked for one (``BatchItem.return_output``).

The outputs themselves stay in the workers; the host only knows their holders, so that a later
step's input can be moved from its holder (:mod:`.transfers`) and a fetch asked of it. A
finished run is released here at once (a fetch fails from then on); its holders are told later,
several runs per message (:meth:`OutputDirectory.take_releases`, at the executor's tick), so
that the message is not on the finished run's way back to its caller and a worker is woken once
for many runs. Not thread-safe: the executor calls it under its lock.
"""

from __future__ import annotations

from collections import OrderedDict

from control.executor.protocol import ItemResult


class OutputDirectory:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity  # returned copies kept, oldest out first
        self._holder: dict[tuple[str, str], str] = {}  # (run, node) -> device id
        self._returned: OrderedDict[tuple[str, str], object] = OrderedDict()
        self._releases: dict[str, list[str]] = {}  # device id -> runs to tell it of
        self.release_messages = 0  # release messages taken (each may name several runs)

    def holder(self, run_id: str, node_id: str) -> str | None:
        """The device whose worker holds the output of this step, or None."""
        return self._holder.get((run_id, node_id))

    def returned(self, run_id: str, node_id: str) -> object | None:
        """The copy that came back with the step's result, or None."""
        return self._returned.get((run_id, node_id))

    def record(self, result: ItemResult) -> None:
        """An ok step's output is held by its device (and came back, when it did)."""
        where = (result.step.run_id, result.step.node_id)
        self._holder[where] = result.device_id
        if result.output is not None:
            self._returned[where] = result.output
            while len(self._returned) > self.capacity:
                self._returned.popitem(last=False)

    def release_run(self, run_id: str) -> None:
        """Forget the run's outputs now; queue a release for every device holding one."""
        keys = [k for k in self._holder if k[0] == run_id]
        holders = {self._holder.pop(k) for k in keys}
        for key in [k for k in self._returned if k[0] == run_id]:
            del self._returned[key]
        for device_id in holders:
            self._releases.setdefault(device_id, []).append(run_id)

    def take_releases(self) -> list[tuple[str, list[str]]]:
        """The releases queued since the last call, per device (sorted), and forget them;
        each is one message to send."""
        releases, self._releases = self._releases, {}
        self.release_messages += len(releases)
        return sorted(releases.items())

    def forget_device(self, device_id: str) -> None:
        """The device's worker is gone, and every output it held with it."""
        for key in [k for k, d in self._holder.items() if d == device_id]:
            del self._holder[key]
        self._releases.pop(device_id, None)
