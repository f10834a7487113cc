"""The native twin core (``control.native``): used only when the build matches every source,
never when ``LEGATO_NATIVE=0``, and when used it decides exactly as the pure-Python core."""

from __future__ import annotations

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


def _which_core(env: dict[str, str]) -> dict:
    code = (
        "import json, control.native as n, sim.executor as d, control.core.engine as e; "
        "print(json.dumps({'active': n.active(), 'files': [d.__file__, e.__file__]}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env={**os.environ, **env},
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return json.loads(out.stdout)


def test_legato_native_0_runs_the_python_sources():
    got = _which_core({"LEGATO_NATIVE": "0"})
    assert got["active"] is False
    assert all(f.endswith(".py") for f in got["files"])


needs_build = pytest.mark.skipif(
    not native.active(),
    reason=f"no current native build in this process: {native.why()}",
)


@needs_build
def test_the_active_native_core_is_the_compiled_one():
    got = _which_core({})
    assert got["active"] is True
    assert not any(f.endswith(".py") for f in got["files"])


_GOLDEN_REPORT = """
import json
from sim.scenario_io import read_scenario_dict
from sim.whatif import compare
raw = read_scenario_dict("agent_dag")
base, comps = compare(raw, raw.pop("variants"))
reports = {"baseline": base.to_dict(), **{c.name: c.report.to_dict() for c in comps}}
print(json.dumps({"digest": base.digest(), "reports": reports}, sort_keys=True))
"""


def _golden_report(env: dict[str, str]) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _GOLDEN_REPORT], cwd=ROOT, env={**os.environ, **env},
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    return json.loads(out.stdout)


@needs_build
def test_native_and_pure_python_cores_give_the_same_golden_scenario_report():
    assert _golden_report({}) == _golden_report({"LEGATO_NATIVE": "0"})
