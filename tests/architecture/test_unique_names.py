"""No module or class of the product defines one name twice.

A second ``def``/``class`` of a name in the same body silently replaces the first: callers of
the first then get the second (once, ``Actuator._settle`` for items was replaced by the one for
run ends, and every call of the first raised inside a swallowed ``except``). The check walks
each body's own statements (definitions inside ``if``/``try`` branches are alternatives, not
repeats) and allows what Python means to be repeated: property setters and deleters, and
``typing.overload`` signatures.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("app", "control", "sim", "db", "bench")

Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _is_redefinition_allowed(node: Definition) -> bool:
    for deco in getattr(node, "decorator_list", ()):
        if isinstance(deco, ast.Attribute) and deco.attr in ("setter", "deleter", "getter"):
            return True
        name = deco.id if isinstance(deco, ast.Name) else getattr(deco, "attr", None)
        if name == "overload":
            return True
    return False


def _repeats(body: list[ast.stmt], where: str) -> Iterator[str]:
    """``where: name (lines a, b)`` for each name defined twice directly in ``body``, then the
    same for every class in it."""
    first: dict[str, int] = {}
    for node in body:
        if not isinstance(node, Definition):
            continue
        if _is_redefinition_allowed(node):
            continue  # the setter of a property, an overload signature before its body
        if node.name in first:
            yield f"{where}: {node.name} (lines {first[node.name]}, {node.lineno})"
        first.setdefault(node.name, node.lineno)
        if isinstance(node, ast.ClassDef):
            yield from _repeats(node.body, f"{where}:{node.name}")


def duplicate_definitions(source: str, where: str) -> list[str]:
    return list(_repeats(ast.parse(source).body, where))


def _product_files() -> Iterator[Path]:
    for top in PRODUCT:
        yield from sorted((ROOT / top).rglob("*.py"))


def test_no_module_or_class_defines_a_name_twice() -> None:
    found = [
        hit
        for path in _product_files()
        for hit in duplicate_definitions(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert found == [], "defined twice (the second replaces the first):\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("class A:\n    def f(self): ...\n    def f(self, x): ...\n", ["m.py:A: f (lines 2, 3)"]),
        ("def g(): ...\nclass g: ...\n", ["m.py: g (lines 1, 2)"]),
        ("class A:\n    class B:\n        def h(self): ...\n        def h(self): ...\n",
         ["m.py:A:B: h (lines 3, 4)"]),
        ("class A:\n    @property\n    def p(self): ...\n    @p.setter\n    def p(self, v): ...\n",
         []),
        ("from typing import overload\n@overload\ndef f(x: int): ...\n@overload\n"
         "def f(x: str): ...\ndef f(x): ...\n", []),
        ("try:\n    def f(): ...\nexcept ImportError:\n    def f(): ...\n", []),
    ],
)  # fmt: skip
def test_the_check_finds_repeats_and_allows_what_python_means(source, expected) -> None:  # noqa: ANN001
    assert duplicate_definitions(source, "m.py") == expected
