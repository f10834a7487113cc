"""The source the native build compiles for a module: its value classes as dataclasses with
written constructors (see ``control.core.values``).

mypyc compiles a written ``__init__`` of a dataclass into direct stores to the instance's
fields but leaves the one dataclasses generates interpreted (slower still than in pure Python),
and it compiles a class carrying a decorator it does not know as a regular Python class. So
``control.native_build`` compiles :func:`rewrite` of each source instead of the source: every
top-level class decorated ``@value`` becomes ``@dataclass(frozen=True)`` and every ``@record``
``@dataclass``, each given a written ``__init__`` (the fields in order with their defaults, each
stored directly, then ``__post_init__``) and ``__reduce__`` (the class and the field values, as
``control.core.values`` defines them in pure Python). Nothing else changes.

Each written method is one line, put on the two blank lines that ``ruff format`` leaves after a
top-level class (inserted only where they are missing), and the two imports they use are
appended to the line importing ``control.core.values``: every line of the compiled copy keeps
its number, so tracebacks from compiled code point at the real source. A declaration this
cannot compile raises :class:`DeclarationError` naming it; ``control.core.values`` refuses the
same declarations when the Python sources run.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

VALUES_MODULE = "control.core.values"
#: decorator -> the dataclass decorator it becomes in the compiled copy
DECORATORS = {"value": "dataclass(frozen=True)", "record": "dataclass"}
DATACLASSES = "_native_dataclasses_"  # names the compiled copy imports them under
VALUES = "_native_values_"


class DeclarationError(ValueError):
    """A ``@value``/``@record`` declaration the native build cannot compile."""


@dataclass(frozen=True)
class Field:
    """One field of a declaration, as source text."""

    name: str
    annotation: str
    default: str | None  # the default's expression, if any
    factory: str | None  # the default factory's expression, if any


@dataclass(frozen=True)
class Declaration:
    """A class declared ``@value`` or ``@record``."""

    name: str
    kind: str  # "value" or "record"
    fields: tuple[Field, ...]
    post_init: bool


def declarations(
    tree: ast.Module, path: str = "<source>"
) -> list[tuple[ast.ClassDef, Declaration]]:
    """Every top-level ``@value``/``@record`` class of a parsed module, in source order."""
    found = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            kind = _kind(node, path)
            if kind is not None:
                found.append((node, _declaration(node, kind, path)))
    return found


def rewrite(source: str, path: str = "<source>") -> str:
    """``source`` as the native build compiles it (see the module). Returns ``source`` itself
    when it declares no value class; raises :class:`DeclarationError`."""
    tree = ast.parse(source, path)
    found = declarations(tree, path)
    if not found:
        return source
    imported = _values_import(tree, path)
    lines = source.splitlines(keepends=True)
    if not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    for node, decl in reversed(found):  # bottom up: a line inserted moves only what follows
        _rewrite_class(lines, node, decl)
    row = imported.end_lineno - 1  # type: ignore[operator]
    col = _column(lines[row], imported.end_col_offset)  # type: ignore[arg-type]
    imports = f"; import dataclasses as {DATACLASSES}; from control.core import values as {VALUES}"
    lines[row] = lines[row][:col] + imports + lines[row][col:]
    return "".join(lines)


def init_line(decl: Declaration, indent: str) -> str:
    """The written ``__init__`` of ``decl``, on one line."""
    params, stores = [], []
    for f in decl.fields:
        if f.factory is not None:
            params.append(f"{f.name}: {f.annotation} | {VALUES}.Missing = {VALUES}.MISSING")
            stored = f"({f.factory})() if isinstance({f.name}, {VALUES}.Missing) else {f.name}"
        else:
            default = "" if f.default is None else f" = {f.default}"
            params.append(f"{f.name}: {f.annotation}{default}")
            stored = f.name
        if decl.kind == "value":
            stores.append(f"object.__setattr__(self, {f.name!r}, {stored})")
        else:
            stores.append(f"self.{f.name} = {stored}")
    if decl.post_init:
        stores.append("self.__post_init__()")
    signature = ", ".join(["self", *params])
    return f"{indent}def __init__({signature}) -> None: {'; '.join(stores) or 'pass'}"


def reduce_line(decl: Declaration, indent: str) -> str:
    """The written ``__reduce__`` of ``decl``: its class and field values, on one line."""
    values = "".join(f"self.{f.name}, " for f in decl.fields)
    return f"{indent}def __reduce__(self) -> tuple[object, ...]: return (type(self), ({values}))"


def _kind(node: ast.ClassDef, path: str) -> str | None:
    kinds = [d.id for d in node.decorator_list if isinstance(d, ast.Name) and d.id in DECORATORS]
    if not kinds:
        return None
    if len(node.decorator_list) != 1:
        raise DeclarationError(
            f"{path}:{node.lineno}: {node.name}: @{kinds[0]} must be the class's only decorator"
        )
    return kinds[0]


def _declaration(node: ast.ClassDef, kind: str, path: str) -> Declaration:
    where = f"{path}:{node.lineno}: @{kind} {node.name}"
    if node.bases or node.keywords:
        raise DeclarationError(f"{where}: value classes have no base classes")
    fields = []
    post_init = False
    for stmt in node.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            if stmt.name == "__init__":
                raise DeclarationError(f"{where}: the constructor is made from the fields")
            post_init = post_init or stmt.name == "__post_init__"
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            field = _field(stmt, f"{where}.{stmt.target.id}")
            if field is not None:
                fields.append(field)
        elif isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__slots__" for t in stmt.targets
        ):
            raise DeclarationError(f"{where}: no __slots__ (see control.core.values)")
    return Declaration(node.name, kind, tuple(fields), post_init)


def _field(stmt: ast.AnnAssign, where: str) -> Field | None:
    """The field an annotated class attribute declares (None: a ``ClassVar``)."""
    root = stmt.annotation.value if isinstance(stmt.annotation, ast.Subscript) else stmt.annotation
    root_name = root.attr if isinstance(root, ast.Attribute) else getattr(root, "id", "")
    if root_name == "ClassVar":
        return None
    if root_name in ("InitVar", "KW_ONLY"):
        raise DeclarationError(f"{where}: {root_name} is not supported")
    name = stmt.target.id  # type: ignore[union-attr]
    annotation = ast.unparse(stmt.annotation)
    value = stmt.value
    if value is None:
        return Field(name, annotation, None, None)
    if not _is_field_call(value):
        return Field(name, annotation, ast.unparse(value), None)
    call: ast.Call = value  # type: ignore[assignment]
    options = {k.arg: k.value for k in call.keywords}
    if call.args or None in options or "init" in options or "kw_only" in options:
        raise DeclarationError(f"{where}: field() takes default, default_factory and metadata")
    default, factory = options.get("default"), options.get("default_factory")
    return Field(
        name,
        annotation,
        None if default is None else ast.unparse(default),
        None if factory is None else ast.unparse(factory),
    )


def _is_field_call(value: ast.expr) -> bool:
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    if isinstance(func, ast.Name):
        return func.id == "field"
    return isinstance(func, ast.Attribute) and func.attr == "field"


def _values_import(tree: ast.Module, path: str) -> ast.ImportFrom:
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == VALUES_MODULE:
            return node
    raise DeclarationError(f"{path}: value classes, but no top-level import from {VALUES_MODULE}")


def _rewrite_class(lines: list[str], node: ast.ClassDef, decl: Declaration) -> None:
    """Turn the decorator of ``node`` into the dataclass one and write its two methods on the
    lines after it (``lines`` holds the module's lines, each with its newline)."""
    dec = node.decorator_list[0]
    row = dec.lineno - 1
    start, end = _column(lines[row], dec.col_offset), _column(lines[row], dec.end_col_offset)  # type: ignore[arg-type]
    lines[row] = f"{lines[row][:start]}{DATACLASSES}.{DECORATORS[decl.kind]}{lines[row][end:]}"
    indent = " " * node.body[0].col_offset
    at = node.end_lineno  # index of the first line after the class
    for text in (init_line(decl, indent), reduce_line(decl, indent)):
        if at < len(lines) and not lines[at].strip():
            lines[at] = text + "\n"
        else:
            lines.insert(at, text + "\n")
        at += 1  # type: ignore[operator]


def _column(line: str, byte_offset: int) -> int:
    """The character index of an ``ast`` column (a UTF-8 byte offset) in ``line``."""
    return len(line.encode()[:byte_offset].decode())
