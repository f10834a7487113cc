"""The architecture rules of ../shared/ARCHITECTURE.md, enforced.

The import-linter contracts live in ``.importlinter`` and the wall-clock rule is a ruff
banned-API rule in ``pyproject.toml``. These tests run both on the project, and prove once on a
deliberately bad temporary tree that each rule really fails when broken.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    path = BIN / name
    if not path.exists():
        found = shutil.which(name)
        if found is None:
            pytest.fail(f"{name} is not installed; install the dev extras")
        return found
    return str(path)


def _run(args: list[str], cwd: Path, env_path: Path | None = None) -> subprocess.CompletedProcess:
    env = {"PATH": str(BIN), "HOME": str(cwd)}
    if env_path is not None:
        env["PYTHONPATH"] = str(env_path)
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_project_keeps_import_contracts() -> None:
    result = _run([_tool("lint-imports"), "--no-cache"], ROOT, ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_project_reads_wall_clock_only_in_clock_module() -> None:
    result = _run([_tool("ruff"), "check", "--select", "TID251", "--no-cache", "."], ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def _fake_tree(tmp_path: Path, files: dict[str, str]) -> Path:
    """A tree with our four root packages, empty but for ``files``."""
    for pkg in (
        "app",
        "control",
        "control/core",
        "control/api",
        "control/services",
        "control/runtime",
        "control/store",
        "control/executor",
        "control/executor/protocol",
        "control/executor/host",
        "control/executor/worker",
        "control/executor/adapters",
        "control/wiring",
        "sim",
        "db",
    ):
        (tmp_path / pkg).mkdir(parents=True, exist_ok=True)
        (tmp_path / pkg / "__init__.py").write_text("")
    for mod in ("control/cli.py", "control/config.py", "control/clock.py"):
        (tmp_path / mod).write_text("")
    for rel, text in files.items():
        (tmp_path / rel).write_text(textwrap.dedent(text))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


@pytest.mark.parametrize(
    ("bad_file", "source", "broken_contract"),
    [
        ("control/core/leak.py", "import control.api\n", "decision core imports nothing"),
        ("control/core/io.py", "import sqlalchemy\n", "decision core imports nothing"),
        ("control/core/timed.py", "from control import clock\n", "decision core imports nothing"),
        ("control/executor/up.py", "import control.services\n", "Dependencies point down"),
        (
            "control/executor/worker/peek.py",
            "import control.executor.host\n",
            "worker side and its model adapters never import its host side",
        ),
        (
            "control/executor/adapters/peek.py",
            "from control.executor.host import local\n",
            "worker side and its model adapters never import its host side",
        ),
        ("control/executor/protocol/heavy.py", "import torch\n", "protocol is shared values only"),
        (
            "control/executor/protocol/side.py",
            "import control.executor.worker\n",
            "protocol is shared values only",
        ),
        (
            "sim/peek.py",
            "import control.executor.host\n",
            "twin knows the executor by its protocol",
        ),
        ("app/page.py", "import db\n", "console talks to the control plane over HTTP"),
        ("control/api/root.py", "import control.wiring\n", "Nothing below the composition root"),
    ],
)
def test_import_contracts_fail_on_a_violation(
    tmp_path: Path, bad_file: str, source: str, broken_contract: str
) -> None:
    tree = _fake_tree(tmp_path, {bad_file: source})
    result = _run([_tool("lint-imports"), "--no-cache"], tree, tree)
    assert result.returncode != 0, result.stdout
    assert broken_contract in result.stdout
    assert "BROKEN" in result.stdout


def test_wall_clock_rule_fails_outside_clock_module(tmp_path: Path) -> None:
    reading = "import time\n\n\ndef now() -> float:\n    return time.monotonic()\n"
    tree = _fake_tree(tmp_path, {"control/core/sneaky.py": reading, "control/clock.py": reading})
    result = _run(
        [
            _tool("ruff"),
            "check",
            "--select",
            "TID251",
            "--no-cache",
            "--output-format",
            "concise",
            ".",
        ],
        tree,
    )
    assert result.returncode != 0
    flagged = {line.split(":")[0] for line in result.stdout.splitlines() if "TID251" in line}
    # The clock module itself is the one allowed place.
    assert flagged == {"control/core/sneaky.py"}
