"""``fast_init``: cheap constructors for the frozen dataclasses the core builds per step.

A frozen dataclass's generated ``__init__`` stores each field through ``object.__setattr__``
(its own ``__setattr__`` refuses every assignment), which costs about a microsecond more per
instance than plain attribute stores. The core and the twin build tens of thousands of these
values per simulated second (step refs, input bindings, batch items, dispatches, queued work).

Such a class writes its own ``__init__``: the fields in order, with the dataclass's defaults,
each stored with ``object.__setattr__(self, "name", name)`` (then ``self.__post_init__()`` if it
has one), and is registered with ``fast_init(cls)`` right after the class (not as a decorator:
mypyc compiles a class carrying a decorator it does not know as a regular Python class). The two
ways the class runs:

- native build (``control.native``): mypyc compiles the written ``__init__`` into direct stores
  to the instance's fields (the ``__init__`` dataclasses would generate stays interpreted, and
  is slower still); ``fast_init`` leaves that ``__init__`` alone;
- Python sources: ``fast_init`` swaps in an ``__init__`` generated from the field list that
  writes the fields straight into the new instance's ``__dict__``, the cheapest way there.

Everything else is the dataclass's own in both: the signature (names, order, defaults, default
factories), ``__post_init__``, equality, hashing, ``repr``, ``__match_args__``, ``replace`` and
the immutability (assigning a field afterwards still raises ``FrozenInstanceError``). Compiled
instances have no ``__dict__``, so ``fast_init`` also registers (with :mod:`copyreg`) pickling
by constructor arguments: ``pickle`` and ``copy`` work the same in both builds, and a value
pickled by one loads in the other. ``tests/core/test_frozen.py`` checks every written
``__init__`` against its fields.

A class that is never compiled (outside ``control/core`` and the twin modules of
``control.native_build``) may keep ``@fast_init`` as a decorator, without a written ``__init__``.
The mutable per-step records of the core and the twin (plain dataclasses) write their
``__init__`` too, with plain ``self.name = name`` stores, for the same reason.

Only plain frozen dataclasses qualify (no ``__slots__``, ``InitVar`` or keyword-only fields);
anything else raises ``TypeError`` when the class is registered, never at construction.
"""

from __future__ import annotations

import copyreg
import dataclasses
from collections.abc import Callable
from types import FunctionType
from typing import Any, TypeVar

T = TypeVar("T")

_MISSING = dataclasses.MISSING


def fast_init(cls: type[T]) -> type[T]:
    """Give the frozen dataclass ``cls`` its cheapest constructor and pickling by constructor
    arguments (see the module); returns ``cls``."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen:
        raise TypeError(f"fast_init: {cls.__name__} is not a frozen dataclass")
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    for f in fields:
        if f.kw_only or f._field_type is not dataclasses._FIELD:  # type: ignore[attr-defined]
            raise TypeError(f"fast_init: {cls.__name__}.{f.name}: keyword-only or InitVar")
    copyreg.pickle(cls, _by_arguments(cls, tuple(f.name for f in fields if f.init)))
    if not isinstance(cls.__dict__.get("__init__"), FunctionType):
        return cls  # compiled (the native build): its own __init__ already stores natively
    if not cls.__dictoffset__:  # __slots__, or compiled without an __init__ of its own
        raise TypeError(f"fast_init: {cls.__name__} instances have no __dict__ to write into")
    cls.__init__ = _dict_init(cls, fields)  # type: ignore[misc,method-assign,assignment]
    return cls


def _by_arguments(cls: type, names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """A ``copyreg`` reducer: rebuild an instance of ``cls`` by calling it with its ``init``
    fields (the others are the constructor's to set)."""

    def reduce(obj: Any) -> tuple[Any, ...]:
        return cls, tuple([getattr(obj, name) for name in names])

    return reduce


def _dict_init(cls: type, fields: tuple[dataclasses.Field, ...]) -> Callable[..., None]:
    """An ``__init__`` for ``cls`` (interpreted) that writes ``fields`` into ``__dict__``."""
    namespace: dict[str, object] = {"_FACTORY": object()}
    args: list[str] = []
    body: list[str] = ["d = self.__dict__"]
    for f in fields:
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
    init: Any = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__dict__["__init__"].__doc__
    return init  # type: ignore[no-any-return]


def keeps_dict(cls: type[T]) -> type[T]:
    """Mark a class whose instances must keep a ``__dict__``; returns ``cls`` unchanged.

    It matters only to the native build (``control.native``): mypyc compiles a class carrying a
    decorator it does not know as a regular Python class (its methods still compiled), where it
    would otherwise make a native class without ``__dict__``. The marked classes are the specs
    that callers serialize with ``vars()``.
    """
    return cls
