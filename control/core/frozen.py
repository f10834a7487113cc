"""``fast_init``: a cheaper constructor for the frozen dataclasses the core builds per step.

A frozen dataclass's generated ``__init__`` stores each field through ``object.__setattr__``
(its own ``__setattr__`` refuses every assignment), which costs about a microsecond more per
instance than plain attribute stores. The core and the twin build tens of thousands of these
values per simulated second (step refs, input bindings, batch items, dispatches, queued work),
so this decorator swaps in an ``__init__`` that writes the fields straight into the new
instance's ``__dict__``. Everything else is the dataclass's own: the signature (names, order,
defaults, default factories), ``__post_init__``, equality, hashing, ``repr``, and the
immutability (assigning a field afterwards still raises ``FrozenInstanceError``).

Only plain frozen dataclasses qualify (no ``__slots__``, ``InitVar`` or keyword-only fields);
anything else raises ``TypeError`` when the class is decorated, never at construction.
"""

from __future__ import annotations

import dataclasses
from typing import TypeVar

T = TypeVar("T")

_MISSING = dataclasses.MISSING


def fast_init(cls: type[T]) -> type[T]:
    """Replace the generated ``__init__`` of the frozen dataclass ``cls`` (see the module)."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen:
        raise TypeError(f"fast_init: {cls.__name__} is not a frozen dataclass")
    if "__slots__" in cls.__dict__:
        raise TypeError(f"fast_init: {cls.__name__} has __slots__ (no instance __dict__)")
    namespace: dict[str, object] = {"_FACTORY": object()}
    args: list[str] = []
    body: list[str] = ["d = self.__dict__"]
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.kw_only or f._field_type is not dataclasses._FIELD:  # type: ignore[attr-defined]
            raise TypeError(f"fast_init: {cls.__name__}.{f.name}: keyword-only or InitVar")
        name = f.name
        if not f.init:
            # as dataclasses does: a plain default stays a class attribute, a factory runs
            if f.default_factory is not _MISSING:
                namespace[f"_fact_{name}"] = f.default_factory
                body.append(f"d[{name!r}] = _fact_{name}()")
            continue
        if f.default is not _MISSING:
            namespace[f"_dflt_{name}"] = f.default
            args.append(f"{name}=_dflt_{name}")
        elif f.default_factory is not _MISSING:
            namespace[f"_fact_{name}"] = f.default_factory
            args.append(f"{name}=_FACTORY")
            body.append(f"if {name} is _FACTORY: {name} = _fact_{name}()")
        else:
            args.append(name)
        body.append(f"d[{name!r}] = {name}")
    if hasattr(cls, "__post_init__"):
        body.append("self.__post_init__()")
    src = f"def __init__(self, {', '.join(args)}):\n" + "".join(f"    {b}\n" for b in body)
    exec(src, namespace)  # noqa: S102  (generated from the class's own field list, as dataclasses does)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"  # type: ignore[attr-defined]
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init  # type: ignore[misc,method-assign,assignment]
    return cls


def keeps_dict(cls: type[T]) -> type[T]:
    """Mark a class whose instances must keep a ``__dict__``; returns ``cls`` unchanged.

    It matters only to the native build (``control.native``): mypyc compiles a class carrying a
    decorator it does not know as a regular Python class (its methods still compiled), where it
    would otherwise make a native class without ``__dict__``. The marked classes are the specs
    that callers serialize with ``vars()`` and the policies whose methods tests replace.
    """
    return cls
