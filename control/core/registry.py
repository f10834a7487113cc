"""``PolicyRegistry``: the one shape of every pluggable policy family of the core.

A family (batching, routing, fair share, placement) registers each strategy once, under its
name, with the frozen config dataclass it takes, a factory and a line of help. Adding a
strategy is adding an entry, never another ``elif``. Everything that chooses a strategy by
name goes through the family's registry: the core building its policies, scenario files (the
config class of a name), the API and console listing what exists.

Misuse raises at once, naming the bad value: an unknown name (``unknown_error``, listing the
known names) or a config of another type (``config_error``, naming the type wanted). Each
family keeps the exception types its callers have always caught (``ValueError``/``TypeError``;
``PlanError`` for placement).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

from control.core.values import value

P = TypeVar("P")


@value
class PolicyEntry:
    """One registered strategy: ``factory(config)`` builds it from an instance of
    ``config_type``. (Not generic: the native build compiles value classes without bases; the
    registry holding it is typed by the policy it builds.)"""

    name: str
    config_type: type
    factory: Callable[[Any], Any]
    help: str


class PolicyRegistry(Generic[P]):
    """The strategies of one family by name (iteration and ``in`` see the names)."""

    def __init__(
        self,
        family: str,
        entries: Iterable[PolicyEntry],
        *,
        unknown_error: type[Exception] = ValueError,
        config_error: type[Exception] = TypeError,
    ) -> None:
        self.family = family
        self._unknown_error = unknown_error
        self._config_error = config_error
        self._entries: dict[str, PolicyEntry] = {}
        for entry in entries:
            self.register(entry)

    def register(self, entry: PolicyEntry) -> None:
        """Add a strategy; a name registered twice is a programming error."""
        if entry.name in self._entries:
            raise ValueError(f"{self.family} {entry.name!r} is registered twice")
        self._entries[entry.name] = entry

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._entries)

    def entry(self, name: str) -> PolicyEntry:
        """The entry registered as ``name``; raises ``unknown_error`` naming it otherwise."""
        found = self._entries.get(name)
        if found is None:
            raise self._unknown_error(f"unknown {self.family} {name!r}; known: {self.names()}")
        return found

    def config_for(self, name: str, config: object | None = None) -> Any:
        """``config`` checked against the strategy's config type (None: its defaults)."""
        entry = self.entry(name)
        if config is None:
            return entry.config_type()
        if not isinstance(config, entry.config_type):
            raise self._config_error(
                f"{self.family} {name!r} needs a {entry.config_type.__name__}, "
                f"got {type(config).__name__}"
            )
        return config

    def build(self, name: str, config: object | None = None) -> P:
        """The strategy ``name`` built with ``config`` (None: its default config)."""
        built: P = self.entry(name).factory(self.config_for(name, config))
        return built
