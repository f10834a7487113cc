"""The twin (``sim/``) uses SimPy through its public API only.

SimPy's private state (the event queue, the clock, an event's outcome) can change between
releases without notice; the twin reaches it only through ``env.step()``, ``env.peek()``,
``env.now``, events and their ``callbacks``, ``Timeout``. Two checks: the issue's own grep (no
``env._x``, ``._ok``, ``._value`` in ``sim/``), and no attribute in ``sim/`` named like the private
instance state SimPy's environment and events keep (read from SimPy's installed sources, so a
new private field is covered too). An attribute of the twin's own that happens to share such a
name must be renamed: in ``sim/`` those names mean SimPy's.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import simpy

ROOT = Path(__file__).resolve().parents[2]
SIM = ROOT / "sim"
GREP = re.compile(r"env\._[a-z]|\._ok\b|\._value\b")


def _sim_files() -> list[Path]:
    return sorted(SIM.rglob("*.py"))


def simpy_private_state() -> set[str]:
    """Names of the private attributes SimPy's environment and events set on themselves."""
    names: set[str] = set()
    for module in ("core.py", "events.py"):
        tree = ast.parse((Path(simpy.__file__).parent / module).read_text())
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else []
            if isinstance(node, ast.AnnAssign | ast.AugAssign):
                targets = [node.target]
            for t in targets:
                for leaf in t.elts if isinstance(t, ast.Tuple) else [t]:
                    if (
                        isinstance(leaf, ast.Attribute)
                        and isinstance(leaf.value, ast.Name)
                        and leaf.value.id == "self"
                        and leaf.attr.startswith("_")
                        and not leaf.attr.startswith("__")
                    ):
                        names.add(leaf.attr)
    return names


def test_the_private_state_list_is_read_from_simpy() -> None:
    assert {"_now", "_queue", "_eid", "_ok", "_value"} <= simpy_private_state()


def test_sim_has_no_match_of_the_issues_grep() -> None:
    hits = [
        f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
        for p in _sim_files()
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if GREP.search(line)
    ]
    assert not hits, "sim/ reaches SimPy's private fields:\n" + "\n".join(hits)


def test_sim_touches_no_private_attribute_simpy_keeps() -> None:
    private = simpy_private_state()
    hits = [
        f"{p.relative_to(ROOT)}:{node.lineno}: .{node.attr}"
        for p in _sim_files()
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.Attribute) and node.attr in private
    ]
    assert not hits, "sim/ uses names of SimPy's private state:\n" + "\n".join(hits)
