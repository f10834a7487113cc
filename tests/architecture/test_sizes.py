"""Product modules stay under 300 lines and functions under 50 (issue #21, item 10).

Small rooms are easier to change: a module over 300 lines or a function over 50 usually does
more than one job, and is split along its responsibilities (not cut at a line count). The
product is ``control/``, ``sim/``, ``db/`` and ``app/``; Alembic revisions
(``db/migrations/versions/``) are exempt: a revision is a frozen record of one schema change,
never edited once released. A module's size is its line count; a function's runs from its
``def`` line to its last line (decorators not counted), nested functions counted in their own
right as well as within the function around them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("control", "sim", "db", "app")
EXEMPT = ("db/migrations/versions/",)
MAX_MODULE_LINES = 300
MAX_FUNCTION_LINES = 50


def oversized(source: str, where: str) -> list[str]:
    """``where: N lines`` when the module is too long, then ``where:LINE name: N lines`` for
    each function too long, in source order."""
    found = []
    lines = len(source.splitlines())
    if lines > MAX_MODULE_LINES:
        found.append(f"{where}: {lines} lines (module, limit {MAX_MODULE_LINES})")
    functions = [
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    for node in sorted(functions, key=lambda n: n.lineno):
        length = (node.end_lineno or node.lineno) - node.lineno + 1
        if length > MAX_FUNCTION_LINES:
            found.append(
                f"{where}:{node.lineno} {node.name}: {length} lines "
                f"(function, limit {MAX_FUNCTION_LINES})"
            )
    return found


def _product_files() -> Iterator[Path]:
    for top in PRODUCT:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if "var" in path.relative_to(ROOT).parts or rel.startswith(EXEMPT):
                continue  # build outputs; frozen migrations
            yield path


def test_product_modules_and_functions_stay_small() -> None:
    found = []
    for path in _product_files():
        found += oversized(path.read_text(), path.relative_to(ROOT).as_posix())
    assert not found, "over the size limits:\n" + "\n".join(found)


def test_the_check_names_each_offender_with_its_size() -> None:
    body = "\n".join(f"    x = {i}" for i in range(MAX_FUNCTION_LINES))  # def + 50 lines: 51
    source = f"def long():\n{body}\n\n\ndef short():\n    return 1\n"
    source += "\n" * (MAX_MODULE_LINES + 1 - len(source.splitlines()))
    assert oversized(source, "m.py") == [
        f"m.py: {MAX_MODULE_LINES + 1} lines (module, limit {MAX_MODULE_LINES})",
        f"m.py:1 long: {MAX_FUNCTION_LINES + 1} lines (function, limit {MAX_FUNCTION_LINES})",
    ]
    assert oversized("def f():\n    return 1\n", "small.py") == []


def test_the_limits_hold_at_exactly_the_limit() -> None:
    body = "\n".join(f"    x = {i}" for i in range(MAX_FUNCTION_LINES - 1))  # def + 49: 50
    source = f"def at_limit():\n{body}\n"
    source += "\n" * (MAX_MODULE_LINES - len(source.splitlines()))
    assert len(source.splitlines()) == MAX_MODULE_LINES
    assert oversized(source, "m.py") == []
