"""``fast_init`` builds the same values as the dataclass's own ``__init__`` and keeps them frozen."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

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
    plain = object.__new__(cls)
    for f, v in zip(dataclasses.fields(cls), args, strict=False):
        object.__setattr__(plain, f.name, v)
    for f in dataclasses.fields(cls)[len(args) :]:
        default = f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[misc]
        object.__setattr__(plain, f.name, default)
    assert fast == plain and vars(fast) == vars(plain)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.key = "other"  # type: ignore[misc]
