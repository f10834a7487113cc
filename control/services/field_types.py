"""The declared types of a configuration dataclass's fields, also when the core runs compiled.

``typing.get_type_hints`` reads a class's ``__annotations__``. The native (mypyc) build of the
core (:mod:`control.native`) rewrites the annotations of the classes it compiles: a field
declared ``float | None`` or ``Any`` is annotated plain ``type`` there, which would make the
policy document refuse every value of it. Where that happens the declaration is read from the
class's source file instead (the same file the build compiled, which it requires to be
current), and evaluated in the compiled module's namespace.
"""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path
from typing import Any, get_type_hints

ROOT = Path(__file__).resolve().parents[2]


@functools.cache
def field_types(cls: type) -> dict[str, Any]:
    """Field name -> declared type of the dataclass ``cls`` (its own and inherited fields)."""
    hints = dict(get_type_hints(cls))
    erased = [name for name, hint in hints.items() if hint is type]
    if erased:
        declared = _declared(cls)
        namespace = vars(sys.modules[cls.__module__])
        for name in erased:
            if name in declared:
                hints[name] = eval(declared[name], dict(namespace))  # noqa: S307 - our own source
    return hints


def _declared(cls: type) -> dict[str, str]:
    """The annotation strings of ``cls``'s fields as its source file writes them."""
    source = ROOT / Path(*cls.__module__.split(".")).with_suffix(".py")
    tree = ast.parse(source.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
            return {
                item.target.id: ast.unparse(item.annotation)
                for item in node.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            }
    return {}
