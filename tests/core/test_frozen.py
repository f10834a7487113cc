"""``fast_init`` builds the same values as the dataclass's own ``__init__`` and keeps them frozen;
every ``__init__`` the core and the twin write for the native build matches its dataclass."""

from __future__ import annotations

import ast
import copy
import dataclasses
import importlib
import inspect
import pickle
from pathlib import Path

import pytest

from control import native
from control.core.actions import BatchItem, Dispatch, InputBinding, StepPlan
from control.core.dag.run import StepRef
from control.core.frozen import fast_init
from control.core.tenancy.base import QueuedWork
from control.core.types import InputRef, StepResult


@dataclasses.dataclass(frozen=True)
class _Plain:
    a: int
    b: str = "x"
    c: tuple = dataclasses.field(default_factory=tuple)
    d: int = dataclasses.field(default=7, init=False)


@fast_init
@dataclasses.dataclass(frozen=True)
class _Fast:
    a: int
    b: str = "x"
    c: tuple = dataclasses.field(default_factory=tuple)
    d: int = dataclasses.field(default=7, init=False)


@fast_init
@dataclasses.dataclass(frozen=True)
class _Checked:
    n: int

    def __post_init__(self) -> None:
        if self.n < 0:
            raise ValueError("n must be >= 0")


def test_same_signature_fields_and_values_as_the_generated_init() -> None:
    plain, fast = inspect.signature(_Plain.__init__), inspect.signature(_Fast.__init__)
    assert [(p.name, p.kind) for p in plain.parameters.values()] == [
        (p.name, p.kind) for p in fast.parameters.values()
    ]
    for args, kwargs in [((1,), {}), ((2, "y"), {}), ((3,), {"c": (1, 2)}), ((), {"a": 4})]:
        p, f = _Plain(*args, **kwargs), _Fast(*args, **kwargs)
        assert vars(p) == vars(f)
    assert _Fast(1).c == () and _Fast(1).d == 7
    with pytest.raises(TypeError):
        _Fast()  # type: ignore[call-arg]  (a required field is still required)


def test_values_stay_frozen_hashable_and_post_init_runs() -> None:
    f = _Fast(1, "y")
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.a = 2  # type: ignore[misc]
    assert f == _Fast(1, "y") and hash(f) == hash(_Fast(1, "y")) and f != _Fast(2, "y")
    assert repr(f) == "_Fast(a=1, b='y', c=(), d=7)"
    assert dataclasses.replace(f, a=5) == _Fast(5, "y")
    with pytest.raises(ValueError, match="n must be"):
        _Checked(-1)


def test_refuses_what_it_cannot_build() -> None:
    @dataclasses.dataclass
    class Mutable:
        a: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Slotted:
        a: int

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class KwOnly:
        a: int

    for cls in (Mutable, Slotted, KwOnly):
        with pytest.raises(TypeError, match="fast_init"):
            fast_init(cls)


@pytest.mark.parametrize(
    ("cls", "args"),
    [
        (InputRef, ("r", "input", "query", None, None)),
        (InputBinding, ("text", ())),
        (StepRef, ("r/n/1", "r", "n", None, 1, "r/n", ())),
        (StepResult, ("r/n/1",)),
        (QueuedWork, ("r/n/1", "r", "t", "standard", 0.5, 3, None)),
        (BatchItem, ("r/n/1", "r", "n", 1, None, "r/n", "embed", (), 10, 0)),
        (
            Dispatch,
            ("b1", "rep", "m:1", None, ("d0",), (), 0, 5, "why"),
        ),
        (StepPlan, (1.0, (), {})),
    ],
)
def test_the_core_values_built_per_step_match_a_plain_dataclass(cls, args) -> None:  # noqa: ANN001
    fast = cls(*args)
    fields = dataclasses.fields(cls)
    expected = (
        list(args)
        + [
            f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[misc]
            for f in fields[len(args) :]
        ]
    )
    assert [getattr(fast, f.name) for f in fields] == expected
    assert fast == cls(*args) and repr(fast) == repr(cls(*args))
    assert dataclasses.replace(fast) == fast
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.key = "other"  # type: ignore[misc]


# ----- the ``__init__`` methods written for the native build (see control/core/frozen.py)
ROOT = Path(__file__).resolve().parents[2]


def _dataclasses() -> dict[tuple[str, str], ast.ClassDef]:
    """(module, class name) -> class definition, for every dataclass in control/core and sim/
    (read from the sources: the native build has none to show)."""
    found = {}
    for path in sorted([*ROOT.glob("control/core/**/*.py"), *ROOT.glob("sim/*.py")]):
        module = path.relative_to(ROOT).with_suffix("").as_posix().replace("/", ".")
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and any(
                "dataclass" in ast.unparse(d) for d in node.decorator_list
            ):
                found[(module, node.name)] = node
    return found


def _registered() -> list[tuple[str, str]]:
    """(module, class) of every ``fast_init(Class)`` call at the top of a module."""
    found = []
    for path in sorted([*ROOT.glob("control/core/**/*.py"), *ROOT.glob("sim/*.py")]):
        module = path.relative_to(ROOT).with_suffix("").as_posix().replace("/", ".")
        for node in ast.parse(path.read_text()).body:
            call = node.value if isinstance(node, ast.Expr) else None
            if isinstance(call, ast.Call) and ast.unparse(call.func) == "fast_init":
                found.append((module, ast.unparse(call.args[0])))
    return found


DATACLASSES = _dataclasses()
#: (module, class, its ``__init__``) of every dataclass that writes its own ``__init__``
WRITTEN = [
    (module, node, item)
    for (module, _), node in DATACLASSES.items()
    for item in node.body
    if isinstance(item, ast.FunctionDef) and item.name == "__init__"
]
REGISTERED = _registered()


def test_every_registered_class_writes_its_own_init() -> None:
    written = {(module, cls.name) for module, cls, _ in WRITTEN}
    assert REGISTERED and set(REGISTERED) <= written


@pytest.mark.parametrize(
    ("module", "cls_node", "init"), WRITTEN, ids=[f"{m}.{c.name}" for m, c, _ in WRITTEN]
)
def test_a_written_init_takes_and_stores_exactly_the_fields(module, cls_node, init) -> None:  # noqa: ANN001
    """Parameters: the fields in order, annotated as the fields, with the same defaults; body:
    one store per field in order (``object.__setattr__`` when frozen), then ``__post_init__``."""
    mod = importlib.import_module(module)
    cls = getattr(mod, cls_node.name)
    fields = dataclasses.fields(cls)
    params = init.args.args[1:]
    assert not init.args.kwonlyargs and init.args.vararg is None and init.args.kwarg is None
    assert [p.arg for p in params] == [f.name for f in fields]
    annotations = {
        s.target.id: ast.unparse(s.annotation)  # type: ignore[union-attr]
        for s in cls_node.body
        if isinstance(s, ast.AnnAssign)
    }
    assert [ast.unparse(p.annotation) for p in params] == [annotations[f.name] for f in fields]  # type: ignore[arg-type]
    defaults = init.args.defaults
    assert len(defaults) == sum(
        1
        for f in fields
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
    )
    for f, d in zip(fields[len(fields) - len(defaults) :], defaults, strict=True):
        value = eval(ast.unparse(d), vars(mod))  # noqa: S307 (our own source)
        want = f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[misc]
        assert value == want and type(value) is type(want), f.name
    frozen = cls.__dataclass_params__.frozen
    store = 'object.__setattr__(self, "{0}", {0})' if frozen else "self.{0} = {0}"
    body = [ast.unparse(s) for s in init.body]
    expected = [ast.unparse(ast.parse(store.format(f.name))) for f in fields]
    if hasattr(cls, "__post_init__"):
        expected.append("self.__post_init__()")
    assert body == expected


_SCALARS: dict[str, object] = {"str": "s", "int": 3, "float": 0.5, "bool": True}


def _value(annotation: str, n: int, namespace: dict[str, object]) -> object:
    """A picklable value of the type ``annotation`` names (the native build checks types)."""
    kind = annotation.split(" | ")[0]
    if kind in _SCALARS:
        scalar = _SCALARS[kind]
        return f"{scalar}{n}" if isinstance(scalar, str) else scalar
    if kind.startswith("tuple"):
        return ()
    if kind.startswith(("Mapping", "dict")):
        return {}
    target = namespace[kind]
    if getattr(target, "_is_protocol", False):
        return f"stands-in-for-{kind}"  # compiled code takes any object for a Protocol
    return _instance(target)  # type: ignore[arg-type]


def _instance(cls: type) -> object:
    """An instance of the dataclass ``cls`` with every field given a distinct value."""
    node = DATACLASSES.get((cls.__module__, cls.__name__))
    if node is None:
        return cls()  # defined elsewhere: its defaults
    mod = importlib.import_module(cls.__module__)
    hints = {
        s.target.id: ast.unparse(s.annotation)  # type: ignore[union-attr]
        for s in node.body
        if isinstance(s, ast.AnnAssign)
    }
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    return cls(*[_value(hints[f.name], n, vars(mod)) for n, f in enumerate(fields)])


@pytest.mark.parametrize(("module", "name"), REGISTERED, ids=[f"{m}.{c}" for m, c in REGISTERED])
def test_registered_values_pickle_and_copy_by_their_fields(module, name) -> None:  # noqa: ANN001
    cls = getattr(importlib.import_module(module), name)
    value = _instance(cls)
    if name == "RoutingContext" and native.active():
        pytest.skip(
            "holds a TransferCosts: compiled frozen dataclasses not registered with "
            "fast_init do not pickle or copy (their __setstate__ meets the frozen __setattr__)"
        )
    for again in (
        pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)),
        copy.copy(value),
        copy.deepcopy(value),
    ):
        assert type(again) is cls and again == value
