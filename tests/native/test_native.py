"""The native twin core (``control.native``): used only when the build matches every source,
never when ``LEGATO_NATIVE=0``, only where an entry point installs it (never as a side effect of
``import control``), and when used it decides exactly as the pure-Python core, with value
classes whose compiled constructors build the same values and pickle across the two builds."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

from control import native

ROOT = Path(__file__).resolve().parents[2]
SOURCES = {"control/core/alpha.py": "A = 1\n", "sim/beta.py": "B = 2\n"}


def _fake_build(tmp_path: Path) -> tuple[Path, Path]:
    """A source tree and a 'build' of it (empty extension files, a true manifest)."""
    root, built = tmp_path / "src", tmp_path / "native"
    modules = {}
    for rel, text in SOURCES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
        name = rel[:-3].replace("/", ".")
        modules[name] = {"source": rel, "sha256": native.source_digest(root / rel)}
        ext = built / "lib" / (rel[:-3] + EXTENSION_SUFFIXES[0])
        ext.parent.mkdir(parents=True, exist_ok=True)
        ext.write_bytes(b"")
    (built / "lib" / f"{native.GROUP}__mypyc{EXTENSION_SUFFIXES[0]}").write_bytes(b"")
    manifest = {"group": native.GROUP, "cache_tag": sys.implementation.cache_tag}
    (built / native.MANIFEST).write_text(json.dumps({**manifest, "modules": modules}))
    return root, built


def test_a_matching_build_is_used_with_every_module_and_the_group_library(tmp_path):
    root, built = _fake_build(tmp_path)
    decision = native.decide(None, built, root)
    assert set(decision.files) == {"control.core.alpha", "sim.beta", f"{native.GROUP}__mypyc"}
    assert decision.warning is None and decision.why.startswith("native")


@pytest.mark.parametrize(
    ("spoil", "named"),
    [
        (lambda root, built: (root / "sim/beta.py").write_text("B = 3\n"), "sim/beta.py"),
        (lambda root, built: (root / "control/core/alpha.py").unlink(), "control/core/alpha.py"),
        (
            lambda root, built: next((built / "lib" / "sim").iterdir()).unlink(),
            "module sim.beta",
        ),
        (lambda root, built: (built / native.MANIFEST).write_text("{"), "unreadable"),
    ],
    ids=["source-edited", "source-removed", "extension-missing", "manifest-broken"],
)
def test_a_stale_build_loads_nothing_and_warns_naming_the_first_stale_file(tmp_path, spoil, named):
    root, built = _fake_build(tmp_path)
    spoil(root, built)
    decision = native.decide(None, built, root)
    assert dict(decision.files) == {}
    assert decision.warning is not None
    assert named in decision.warning and native.REBUILD in decision.warning


def test_legato_native_0_disables_even_a_matching_build(tmp_path):
    root, built = _fake_build(tmp_path)
    decision = native.decide("0", built, root)
    assert dict(decision.files) == {} and decision.warning is None
    assert "LEGATO_NATIVE=0" in decision.why


def test_no_build_is_the_quiet_pure_python_case(tmp_path):
    decision = native.decide(None, tmp_path / "none", tmp_path)
    assert dict(decision.files) == {} and decision.warning is None


def test_a_module_imported_before_the_hook_keeps_the_whole_build_out(tmp_path):
    root, built = _fake_build(tmp_path)
    decision = native.decide(None, built, root, imported={"sim.beta", "json"})
    assert dict(decision.files) == {}
    assert "sim.beta" in (decision.warning or "")


def _run(code: str, env: dict[str, str] | None = None, *args: str) -> dict:
    """Run ``code`` in a fresh interpreter at the repository root; its last line is JSON."""
    out = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=ROOT, env={**os.environ, **(env or {})},
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    return json.loads(out.stdout.splitlines()[-1])


def _which_core(env: dict[str, str]) -> dict:
    return _run(
        "import json, control.native as n; n.install(); "
        "import sim.executor as d, control.core.engine as e; "
        "print(json.dumps({'active': n.active(), 'files': [d.__file__, e.__file__]}))",
        env,
    )


def test_legato_native_0_runs_the_python_sources():
    got = _which_core({"LEGATO_NATIVE": "0"})
    assert got["active"] is False
    assert all(f.endswith(".py") for f in got["files"])


def _current_build() -> str | None:
    """Why there is no current native build of this tree (None: there is one)."""
    try:
        return None if native.check() else "no native build (`make native` builds one)"
    except native.StaleBuild as exc:
        return f"stale native build: {exc}"


needs_build = pytest.mark.skipif(_current_build() is not None, reason=str(_current_build()))


def test_importing_control_and_the_twin_activates_nothing():
    got = _run(
        "import json, control, sim, control.native as n, control.core.engine as e, sim.executor; "
        "print(json.dumps({'installed': n._state['installed'], 'file': e.__file__}))"
    )
    assert got == {"installed": False, "file": str(ROOT / "control/core/engine.py")}


def test_the_legato_command_activates_it_before_any_command_imports_the_core():
    got = _run(
        "import json, sys, control.cli as cli, control.native as n\n"
        "early = sorted(m for m in sys.modules if m.startswith(('control.core', 'sim')))\n"
        "sys.argv = ['legato', 'sim', '--help']\n"  # the console script calls cli.app
        "try:\n    cli.app(prog_name='legato')\nexcept SystemExit:\n    pass\n"
        "print(json.dumps({'early': early, 'installed': n._state['installed']}))"
    )
    assert got == {"early": [], "installed": True}


def _installs_before_the_core(path: Path) -> bool | None:
    """Whether the script ``path`` calls ``native.install()`` before importing anything of
    ours but ``control.native``/``control.clock`` (None: it imports nothing else of ours)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Expr) and ast.unparse(node.value) == "native.install()":
            return True
        names = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        ours = [n for n in names if n.split(".")[0] in ("control", "sim", "tests", "db", "app")]
        if any(n not in ("control.native", "control.clock") for n in ours):
            return False
    return None


@pytest.mark.parametrize("bench", sorted((ROOT / "bench").glob("*.py")), ids=lambda p: p.name)
def test_every_bench_of_the_core_activates_it_before_importing_it(bench):
    if "control.core" in bench.read_text() or "from sim" in bench.read_text():
        assert _installs_before_the_core(bench) is True


def test_a_spawned_entry_point_activates_it_before_importing_its_module(tmp_path):
    import multiprocessing

    from tests.native.spawned import report

    out = tmp_path / "child.json"
    proc = multiprocessing.get_context("spawn").Process(target=report, args=(str(out),))
    proc.start()
    proc.join(120)
    got = json.loads(out.read_text())
    assert got["installed"] is True
    assert got["active"] is (_current_build() is None)
    assert got["engine"].endswith(".py") is not got["active"]


@needs_build
def test_the_active_native_core_is_the_compiled_one():
    got = _which_core({})
    assert got["active"] is True
    assert not any(f.endswith(".py") for f in got["files"])


_GOLDEN_REPORT = """
import json
from control import native
native.install()
from sim.scenario_io import read_scenario_dict
from sim.whatif import compare
raw = read_scenario_dict("agent_dag")
base, comps = compare(raw, raw.pop("variants"))
reports = {"baseline": base.to_dict(), **{c.name: c.report.to_dict() for c in comps}}
print(json.dumps({"digest": base.digest(), "reports": reports}, sort_keys=True))
"""


def _golden_report(env: dict[str, str]) -> dict:
    return _run(_GOLDEN_REPORT, env)


@needs_build
def test_native_and_pure_python_cores_give_the_same_golden_scenario_report():
    assert _golden_report({}) == _golden_report({"LEGATO_NATIVE": "0"})


_VALUES = """
import json, pickle, sys
from control import native
native.install()
from control.core.actions import BatchItem, Dispatch, InputBinding, StepPlan
from control.core.tenancy.base import QueuedWork
from control.core.types import InputRef, StepResult
from sim.metrics import RequestRecord
ref = InputRef("r", "n", "text", "d0", "rep", 2)
binding = InputBinding("text", (ref,))
item = BatchItem("r/n/1", "r", "n", 1, None, "r/n", "embed", (binding,), 10, 4, (7,), 1, {"k": 1})
plan = StepPlan(1.5, (Dispatch("b", "rep", "m:1", None, ("d0",), (item,), 16, 900, "why"),), {})
values = [plan, StepResult("r/n/1", output_tokens=3), QueuedWork("k", "r", "t", "batch", 0.5, 7),
          RequestRecord(0.5, "t", "w", None, 1.0, 2.0, "succeeded")]
theirs = pickle.loads(bytes.fromhex(sys.argv[1])) if len(sys.argv) > 1 else values
print(json.dumps({"active": native.active(), "same": theirs == values,
                  "pickled": pickle.dumps(values, protocol=pickle.HIGHEST_PROTOCOL).hex()}))
"""


@needs_build
def test_a_value_pickled_by_one_build_loads_in_the_other():
    pure, compiled = _run(_VALUES, {"LEGATO_NATIVE": "0"}), _run(_VALUES)
    assert (pure["active"], compiled["active"]) == (False, True)
    assert _run(_VALUES, {}, pure["pickled"])["same"] is True
    assert _run(_VALUES, {"LEGATO_NATIVE": "0"}, compiled["pickled"])["same"] is True


@needs_build
def test_the_compiled_value_classes_have_compiled_constructors():
    """The written constructors of the compiled copy, not dataclasses' generated (interpreted)
    ones, are what the native build's value classes run."""
    got = _run(
        "import ast, json, types, importlib\n"
        "from control import native\n"
        "native.install()\n"
        "from control.native_build import compiled_sources\n"
        "from control.native_source import declarations\n"
        "found = {}\n"
        "for rel in compiled_sources():\n"
        "    for node, _ in declarations(ast.parse(open(rel).read()), rel):\n"
        "        cls = getattr(importlib.import_module(rel[:-3].replace('/', '.')), node.name)\n"
        "        found[node.name] = isinstance(vars(cls)['__init__'], types.FunctionType)\n"
        "print(json.dumps({'active': native.active(), 'interpreted': found}))"
    )
    assert got["active"] is True and len(got["interpreted"]) >= 37
    assert not any(got["interpreted"].values()), got["interpreted"]
