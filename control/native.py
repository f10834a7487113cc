"""The native twin core: use the mypyc build of ``var/native`` only when it is exactly current.

``make native`` (``python -m control.native_build``) compiles ``control/core`` and the twin's
hot modules into one mypyc group under ``var/native/lib`` and writes ``var/native/manifest.json``
with the sha256 of every compiled source. :func:`install` puts a finder first on
``sys.meta_path`` that serves those modules from the build, but only if EVERY listed source still
matches its hash and every built file is there: the modules of a group call each other
natively, so a partial mix would still run old code. If anything is stale it loads nothing
compiled and logs one warning naming the first stale file and the command to rebuild. No build
at all is the normal case and says nothing.

Nothing is installed as a side effect of an import: the entry points that want the compiled
core call :func:`install` before they import it (the ``legato`` command, before any of its
commands runs; the benches of the core and the twin; the test suite's ``conftest``), and
a body that a spawned process runs is marked :func:`entry_point` (the what-if and fidelity
workers). ``LEGATO_NATIVE=0`` disables it. :func:`active` tells benches and ``legato`` which
core runs. This module is itself never compiled, and imports nothing of ours.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import logging
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib.abc import MetaPathFinder
from importlib.machinery import EXTENSION_SUFFIXES, ExtensionFileLoader, ModuleSpec
from importlib.util import spec_from_file_location
from pathlib import Path
from typing import Any, Generic, ParamSpec, TypeVar

ROOT = Path(__file__).resolve().parents[1]
NATIVE_DIR = ROOT / "var" / "native"
MANIFEST = "manifest.json"
GROUP = "legato_native"  # mypyc group name: its shared library is ``legato_native__mypyc``
REBUILD = "make native"
ENV = "LEGATO_NATIVE"

log = logging.getLogger("legato.native")

_state = {"installed": False, "active": False, "why": "not installed"}


def source_digest(path: Path) -> str:
    """The sha256 (hex) of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def active() -> bool:
    """Whether the compiled core is in use in this process."""
    return bool(_state["active"])


def why() -> str:
    """One line on which core runs and why (for benches and ``legato``)."""
    return str(_state["why"])


class StaleBuild(Exception):
    """The native build does not match the sources; the message names the first stale file."""


def check(native_dir: Path = NATIVE_DIR, root: Path = ROOT) -> dict[str, Path]:
    """The built file of every module of a build that matches ``root``'s sources exactly
    (module name -> extension file, the group's shared library included).

    Returns ``{}`` when there is no build. Raises :class:`StaleBuild` when there is one that
    does not match: a compiled source edited or removed since, another Python, a missing built
    file. (A module added since is not in the build and runs as Python: the compiled modules
    that import it changed, so they are stale.)"""
    manifest_path = native_dir / MANIFEST
    if not manifest_path.is_file():
        return {}
    try:
        manifest = json.loads(manifest_path.read_text())
        group, modules = manifest["group"], manifest["modules"]
    except (ValueError, KeyError, TypeError) as exc:
        raise StaleBuild(f"{manifest_path} is unreadable ({exc})") from exc
    if manifest.get("cache_tag") != sys.implementation.cache_tag:
        raise StaleBuild(f"{manifest_path} was built for {manifest.get('cache_tag')}")
    suffix = EXTENSION_SUFFIXES[0]
    lib = native_dir / "lib"
    files = {f"{group}__mypyc": lib / f"{group}__mypyc{suffix}"}
    for name, entry in sorted(modules.items()):
        source = root / entry["source"]
        if not source.is_file() or source_digest(source) != entry["sha256"]:
            raise StaleBuild(f"{entry['source']} changed since the native build")
        files[name] = lib / (name.replace(".", "/") + suffix)
    for name, path in files.items():
        if not path.is_file():
            raise StaleBuild(f"{path} (module {name}) is missing from the native build")
    return files


class NativeFinder(MetaPathFinder):
    """Serves the listed modules from their extension files; everything else falls through."""

    def __init__(self, files: Mapping[str, Path]) -> None:
        self.files = files

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> ModuleSpec | None:
        file = self.files.get(fullname)
        if file is None:
            return None
        return spec_from_file_location(
            fullname, file, loader=ExtensionFileLoader(fullname, str(file))
        )


@dataclass(frozen=True)
class Decision:
    """What :func:`install` does: serve ``files`` (empty: nothing compiled), why, and the one
    warning to log (``None``: nothing worth a warning)."""

    files: Mapping[str, Path]
    why: str
    warning: str | None = None


def decide(
    env_value: str | None, native_dir: Path, root: Path, imported: Iterable[str] = ()
) -> Decision:
    """Whether to use the build in ``native_dir`` for the sources under ``root``, given the
    value of ``LEGATO_NATIVE`` and the modules already imported. Reads files, changes nothing."""
    if env_value == "0":
        return Decision({}, f"pure Python ({ENV}=0)")
    try:
        files = check(native_dir, root)
    except StaleBuild as exc:
        warning = f"native twin core not used: {exc}; rebuild it with `{REBUILD}`"
        return Decision({}, f"pure Python (stale native build: {exc})", warning)
    if not files:
        return Decision({}, f"pure Python (no native build; `{REBUILD}` builds one)")
    loaded = sorted(set(files) & set(imported))
    if loaded:  # it would run alongside the compiled others: all or nothing
        warning = f"native twin core not used: {loaded[0]} was imported before native.install()"
        return Decision({}, f"pure Python ({loaded[0]} imported before the native hook)", warning)
    return Decision(files, f"native ({len(files) - 1} modules compiled in {native_dir})")


def install(native_dir: Path = NATIVE_DIR, root: Path = ROOT) -> bool:
    """Use the native build if there is a current one (see :func:`decide`): put its finder
    first on ``sys.meta_path``, or log the decision's warning. Call it before importing any
    compiled module (``control.core``, the twin's compiled modules). Once per process (later
    calls return the first answer); returns :func:`active`."""
    if _state["installed"]:
        return active()
    decision = decide(os.environ.get(ENV), native_dir, root, sys.modules)
    if decision.warning:
        log.warning("%s", decision.warning)
    if decision.files:
        sys.meta_path.insert(0, NativeFinder(decision.files))
    _state.update(installed=True, active=bool(decision.files), why=decision.why)
    return active()


P = ParamSpec("P")
R = TypeVar("R")


class EntryPoint(Generic[P, R]):
    """A function that a spawned process runs (see :func:`entry_point`). Calling it calls the
    function; pickling it (as ``multiprocessing`` does for a process's target) pickles a
    reference that, unpickled in the new process, first calls :func:`install` and only then
    imports the function's module, so that the module's imports get the compiled core."""

    def __init__(self, fn: Callable[P, R]) -> None:
        self.fn = fn
        functools.update_wrapper(self, fn)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return _spawned_entry_point, (self.fn.__module__, self.fn.__qualname__)


def entry_point(fn: Callable[P, R]) -> EntryPoint[P, R]:
    """Mark ``fn`` (a module-level function) as the body of a spawned process that wants the
    compiled core: the process activates it before importing ``fn``'s module. A call in this
    process runs ``fn`` with whichever core this process has."""
    return EntryPoint(fn)


def _spawned_entry_point(module: str, qualname: str) -> EntryPoint[..., Any]:
    """Unpickling an :class:`EntryPoint` in a new process: install, then import it."""
    install()
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found  # type: ignore[no-any-return]
