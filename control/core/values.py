"""``@value`` and ``@record``: the small classes the core and the twin build per step, declared once.

The core and the twin build tens of thousands of small values per simulated second (step refs,
input bindings, batch items, dispatches, queued work) and a few mutable per-step records
(in-flight batches, run records). Each is declared once, as dataclass fields::

    @value
    class InputBinding:
        \"\"\"One input field of a step and where its data lives.\"\"\"

        target_field: str
        refs: tuple[InputRef, ...]

``@value`` makes a frozen dataclass, ``@record`` a mutable one with ``__slots__``. Both give the
class the cheapest constructor each build can have, and pickling by constructor arguments:

- Python sources: a ``@value``'s ``__init__`` is generated from the field list and writes the
  fields straight into the new instance's ``__dict__`` (the frozen dataclass's own stores each
  field through ``object.__setattr__``: three times slower at 13 fields); a ``@record``'s stores
  each field plainly, as the dataclass's own does.
- native build: ``control.native_build`` compiles a copy of the sources in which each
  declaration is a plain ``@dataclass`` with a written ``__init__`` of direct stores
  (``control.native_source``); mypyc leaves dataclasses' generated ``__init__`` interpreted,
  some 25 times slower than the written one.

Everything else is the dataclass's own in both builds: fields, defaults, ``__post_init__``
(called after the stores), equality, hashing, ``repr``, ``__match_args__``, ``replace`` and,
for ``@value``, immutability (assigning a field raises ``FrozenInstanceError``). Both builds
define ``__reduce__`` as ``(class, field values)``: ``pickle`` and ``copy`` work the same in
both (compiled instances have no ``__dict__``), and a value pickled by one loads in the other.

A field may have a plain default, ``field(default=...)`` or ``field(default_factory=...)`` (the
constructor's default is then :data:`MISSING`: "not given, call the factory"), and ``metadata``.
Refused with ``TypeError`` when the class is declared (so both builds accept the same classes):
a written ``__init__``, base classes, ``__slots__`` (a ``@record`` has them anyway),
``InitVar``, keyword-only fields, ``field(init=False)``; the native build also refuses another
decorator on the class (mypyc would compile it as a regular Python class).

:func:`keeps_dict` marks specs that keep their ``__dict__`` in the native build.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Final, TypeVar, dataclass_transform

T = TypeVar("T")


class Missing:
    """The type of :data:`MISSING`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


#: The constructor's default for a field with a ``default_factory``: not given, call the factory.
MISSING: Final = Missing()


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
def value(cls: type[T]) -> type[T]:
    """Declare the frozen value class ``cls`` (see the module); returns the dataclass."""
    _check_declaration(cls, "value")
    if "__slots__" in cls.__dict__:
        raise TypeError(f"@value {cls.__name__}: instances keep a __dict__; remove __slots__")
    made = dataclasses.dataclass(frozen=True)(cls)
    return _finish(made, _init_fields(made, "value"), frozen=True)


@dataclass_transform(field_specifiers=(dataclasses.field,))
def record(cls: type[T]) -> type[T]:
    """Declare the mutable record class ``cls`` (see the module); returns the dataclass (with
    ``__slots__``: compiled instances have no ``__dict__`` either)."""
    _check_declaration(cls, "record")
    if "__slots__" in cls.__dict__:
        raise TypeError(f"@record {cls.__name__}: the slots are made from the fields")
    made = dataclasses.dataclass(slots=True)(cls)
    return _finish(made, _init_fields(made, "record"), frozen=False)


def keeps_dict(cls: type[T]) -> type[T]:
    """Mark a class whose instances must keep a ``__dict__``; returns ``cls`` unchanged.

    It matters only to the native build (``control.native``): mypyc compiles a class carrying a
    decorator it does not know as a regular Python class (its methods still compiled), where it
    would otherwise make a native class without ``__dict__``. The marked classes are the specs
    that callers serialize with ``vars()``.
    """
    return cls


def _check_declaration(cls: type, kind: str) -> None:
    if "__init__" in cls.__dict__:
        raise TypeError(
            f"@{kind} {cls.__name__}: the constructor is made from the fields; "
            "remove the written __init__"
        )
    if cls.__bases__ != (object,):
        raise TypeError(f"@{kind} {cls.__name__}: value classes have no base classes")


def _init_fields(cls: type, kind: str) -> tuple[dataclasses.Field, ...]:
    """The dataclass fields of ``cls``; raises TypeError for one the constructors cannot take."""
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    for f in fields:
        if f.kw_only or not f.init:
            raise TypeError(f"{kind} {cls.__name__}.{f.name}: keyword-only or init=False")
    every = cls.__dataclass_fields__.values()  # type: ignore[attr-defined]
    if any(f._field_type is dataclasses._FIELD_INITVAR for f in every):  # type: ignore[attr-defined]
        raise TypeError(f"{kind} {cls.__name__}: InitVar fields are not supported")
    return fields


def _finish(cls: type[T], fields: tuple[dataclasses.Field, ...], frozen: bool) -> type[T]:
    """Install the generated ``__init__`` and ``__reduce__`` on ``cls``; returns it."""
    names = tuple(f.name for f in fields)
    cls.__init__ = _python_init(cls, fields, frozen)  # type: ignore[misc,method-assign,assignment]

    def __reduce__(self: Any) -> tuple[Any, ...]:
        return type(self), tuple([getattr(self, name) for name in names])

    __reduce__.__qualname__ = f"{cls.__qualname__}.__reduce__"
    cls.__reduce__ = __reduce__  # type: ignore[method-assign,assignment]
    return cls


def _python_init(
    cls: type, fields: tuple[dataclasses.Field, ...], frozen: bool
) -> Callable[..., None]:
    """An ``__init__`` for ``cls`` (interpreted): each field stored in order (into ``__dict__``
    when ``frozen``), then ``__post_init__`` if the class has one."""
    namespace: dict[str, object] = {"MISSING": MISSING}
    args: list[str] = []
    body: list[str] = ["d = self.__dict__"] if frozen else []
    for f in fields:
        name = f.name
        if f.default is not dataclasses.MISSING:
            namespace[f"_dflt_{name}"] = f.default
            args.append(f"{name}=_dflt_{name}")
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"_fact_{name}"] = f.default_factory
            args.append(f"{name}=MISSING")
            body.append(f"if {name} is MISSING: {name} = _fact_{name}()")
        else:
            args.append(name)
        body.append(f"d[{name!r}] = {name}" if frozen else f"self.{name} = {name}")
    if hasattr(cls, "__post_init__"):
        body.append("self.__post_init__()")
    src = f"def __init__(self, {', '.join(args)}):\n" + "".join(
        f"    {b}\n" for b in body or ["pass"]
    )
    exec(src, namespace)  # noqa: S102  (generated from the class's own field list, as dataclasses does)
    init: Any = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init  # type: ignore[no-any-return]
