"""Build the native (mypyc) twin core: ``python -m control.native_build`` (``make native``).

Compiles the decision core (``control/core``) and the twin's hot modules into ONE mypyc group
(compiled modules call each other natively) under ``var/native/`` (git-ignored), never next to
the sources, and writes ``manifest.json``: the sha256 of every compiled source, of the bytes the
build compiled. ``control.native`` loads the build only while every listed source still
matches, so an edit made during or after a build can never run stale code.

mypyc compiles a copy of the packages in the scratch folder, not the sources themselves: in the
copy, each value class declared with ``@value``/``@record`` is a dataclass with a written
constructor (``control.native_source``), which mypyc compiles into direct stores. The copy keeps
every line number, so tracebacks from compiled code point at the real sources.

The build goes to a scratch folder and replaces ``var/native`` only when it succeeded; a failed
build removes the old one (it no longer matches what was asked for). The C files are compiled in
parallel (``-j``, default: the CPU count). Needs mypy (the ``dev`` extra) and a C compiler.

    LEGATO_NATIVE=0 python -m control.native_build [--jobs N] [--if-stale] [--best-effort]

(``LEGATO_NATIVE=0``: the builder itself runs on the Python sources, and says nothing about the
build it is replacing.)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from control.clock import perf_counter
from control.native import GROUP, MANIFEST, NATIVE_DIR, ROOT, StaleBuild, check
from control.native_source import rewrite

#: Twin modules compiled with the core: the simulated executor and the recorder. The driver
#: (``sim/driver.py``) stays interpreted: tests drive it with stand-in cores and executors,
#: which compiled code would refuse (it checks argument types at run time).
SIM_MODULES = ("sim/executor.py", "sim/metrics.py", "sim/continuous.py")
#: Core modules left interpreted: exception classes derive from builtins (mypyc cannot); the
#: value-class decorators carry ``typing.dataclass_transform``'s marker, which a compiled function
#: cannot (they run at import only: the compiled copy declares its classes without them).
SKIPPED = {"control/core/errors.py", "control/core/values.py"}
#: Packages copied for mypyc to compile from (the compiled modules and what they import).
PACKAGES = ("control", "sim")
BUILD_LOG = NATIVE_DIR.parent / "native-build.log"


def compiled_sources() -> list[str]:
    """The compiled source files, relative to the repository root, sorted. Package
    ``__init__`` files stay interpreted (they are empty or re-export)."""
    core = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "control/core").rglob("*.py"))
    core = [p for p in core if p not in SKIPPED and not p.endswith("__init__.py")]
    return core + list(SIM_MODULES)


def _compile_in_parallel(compiler: Any, jobs: int) -> None:
    """Make ``compiler`` (a distutils C compiler) compile the C files of one extension in
    ``jobs`` threads; distutils compiles them one after another, and multi-file mypyc output
    has one C file per module. Uses the compiler's own steps (``_setup_compile``, ``_compile``)."""

    def compile_(sources, output_dir=None, macros=None, include_dirs=None, debug=False,
                 extra_preargs=None, extra_postargs=None, depends=None):  # fmt: skip
        macros, objects, extra_postargs, pp_opts, todo = compiler._setup_compile(
            output_dir, macros, include_dirs, sources, depends, extra_postargs
        )
        cc_args = compiler._get_cc_args(pp_opts, debug, extra_preargs)

        def one(obj: str) -> None:
            src, ext = todo[obj]
            compiler._compile(obj, src, ext, cc_args, extra_postargs, pp_opts)

        with ThreadPoolExecutor(max(1, jobs)) as pool:
            list(pool.map(one, [o for o in objects if o in todo]))
        return objects

    compiler.compile = compile_


def _build_ext_command(jobs: int) -> type:
    """setuptools' ``build_ext`` with the C files of each extension compiled in parallel."""
    from setuptools.command.build_ext import build_ext

    class ParallelBuildExt(build_ext):
        def build_extensions(self) -> None:
            _compile_in_parallel(self.compiler, jobs)
            super().build_extensions()

    return ParallelBuildExt


def build(jobs: int) -> Path:
    """Compile into a scratch folder, then move it to ``var/native``. Returns that folder.
    Raises on any failure (type errors, compiler errors), leaving no ``var/native``."""
    from mypyc.build import mypycify
    from setuptools import setup

    sources = compiled_sources()
    NATIVE_DIR.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(NATIVE_DIR, ignore_errors=True)
    scratch = Path(tempfile.mkdtemp(prefix="native.", dir=NATIVE_DIR.parent))
    copy, digests = scratch / "src", _compiled_copy(scratch / "src", sources)
    cwd = os.getcwd()
    try:
        os.chdir(copy)  # mypyc names modules after paths relative to the working directory
        extensions = mypycify(
            sources, opt_level="3", multi_file=True, group_name=GROUP,
            target_dir=str(scratch / "c"),
        )  # fmt: skip
        setup(
            name="legato-native",
            ext_modules=extensions,
            cmdclass={"build_ext": _build_ext_command(jobs)},
            script_args=["-q", "build_ext", "--build-lib", str(scratch / "lib"),
                         "--build-temp", str(scratch / "obj"), "--parallel", str(jobs)],
        )  # fmt: skip
    finally:
        os.chdir(cwd)
    modules = {
        src[:-3].replace("/", "."): {"source": src, "sha256": digests[src]} for src in sources
    }
    manifest = {
        "group": GROUP,
        "cache_tag": sys.implementation.cache_tag,
        "modules": modules,
    }
    for done in ("c", "obj", "src"):
        shutil.rmtree(scratch / done)
    (scratch / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
    scratch.rename(NATIVE_DIR)
    return NATIVE_DIR


def _compiled_copy(dest: Path, sources: list[str]) -> dict[str, str]:
    """Copy the Python files of :data:`PACKAGES` to ``dest``, each compiled source as
    :func:`~control.native_source.rewrite` makes it. Returns the sha256 of each compiled
    source, of the very bytes copied (what the manifest records)."""
    digests = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            data = path.read_bytes()
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if rel in sources:
                digests[rel] = hashlib.sha256(data).hexdigest()
                target.write_text(rewrite(data.decode(), rel))
            else:
                target.write_bytes(data)
    return digests


def _is_current() -> bool:
    """Whether ``var/native`` holds a build of exactly the current sources."""
    try:
        return bool(check())
    except StaleBuild:
        return False


def _build_logged(jobs: int, log_path: Path) -> None:
    """:func:`build` with everything it prints (mypy, setuptools, the C compiler, which write to
    the process's file descriptors) sent to ``log_path``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log_path, "w") as log_file:
        os.dup2(log_file.fileno(), 1)
        os.dup2(log_file.fileno(), 2)
        try:
            build(jobs)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--if-stale", action="store_true", help="do nothing if the build is current"
    )
    parser.add_argument(
        "--best-effort",
        action="store_true",
        help=f"on failure print one sentence (details in {BUILD_LOG.relative_to(ROOT)}) and exit 0: "
        "the pure-Python core stays in use",
    )
    args = parser.parse_args(argv)
    if args.if_stale and _is_current():
        return 0
    started = perf_counter()
    try:
        if args.best_effort:
            print(f"building the native twin core (mypyc, {args.jobs} jobs) ...", flush=True)
            _build_logged(args.jobs, BUILD_LOG)
        else:
            build(args.jobs)
    except (Exception, SystemExit) as exc:  # setuptools reports compiler errors as SystemExit
        for scratch in NATIVE_DIR.parent.glob("native.*"):
            shutil.rmtree(scratch, ignore_errors=True)
        if not args.best_effort:
            raise
        if isinstance(exc, SystemExit):  # mypyc and setuptools exit on type or compiler errors
            cause = "mypyc or the C compiler failed"
        else:
            cause = f"{type(exc).__name__}: {str(exc)[:100]}"
        print(
            f"The native twin core was not built ({cause}; details in "
            f"{BUILD_LOG.relative_to(ROOT)}), so the pure-Python core will run."
        )
        return 0
    print(
        f"native twin core built in {NATIVE_DIR.relative_to(ROOT)}: "
        f"{len(compiled_sources())} modules, {perf_counter() - started:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
