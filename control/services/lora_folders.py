"""What a LoRA adapter folder holds, read before it is registered (no model is loaded).

A PEFT folder has ``adapter_config.json`` (``peft_type`` LORA, rank ``r``, ``target_modules``)
and its weights (``adapter_model.safetensors`` or ``adapter_model.bin``). It fits a base model
when every target module names modules the base has: checked against the base's weight names
(read from its safetensors headers) when the base is a local folder; a base whose weights are
elsewhere (a package, a hub id) is checked when a replica loads the adapter, which then fails
the request's items naming ``adapter``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from control.services.errors import ValidationError

CONFIG = "adapter_config.json"
WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")


@dataclass(frozen=True)
class AdapterFolder:
    """The facts registration keeps: rank, target modules and the weights' size."""

    rank: int
    targets: tuple[str, ...] | str  # module names, or a regex PEFT matches against full names
    memory_mib: int


def read_adapter(folder: Path, field: str = "path") -> AdapterFolder:
    """The adapter in ``folder``; ValidationError naming ``field`` when it is no LoRA folder."""
    if not folder.is_dir():
        raise ValidationError(field, str(folder), "is not a folder")
    try:
        config = json.loads((folder / CONFIG).read_text())
    except (OSError, ValueError) as exc:
        raise ValidationError(field, str(folder), f"has no readable {CONFIG} ({exc})") from exc
    if not isinstance(config, dict) or config.get("peft_type") != "LORA":
        got = config.get("peft_type") if isinstance(config, dict) else config
        raise ValidationError(field, str(folder), f"is not a LoRA adapter (peft_type {got!r})")
    rank = config.get("r")
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ValidationError(field, str(folder), f"{CONFIG} has no positive rank r ({rank!r})")
    targets = config.get("target_modules")
    if isinstance(targets, list) and targets and all(isinstance(t, str) for t in targets):
        targets = tuple(targets)
    elif not isinstance(targets, str) or not targets:
        raise ValidationError(field, str(folder), f"{CONFIG} names no target_modules")
    weights = [folder / name for name in WEIGHTS if (folder / name).is_file()]
    if not weights:
        raise ValidationError(field, str(folder), f"holds no weights ({' or '.join(WEIGHTS)})")
    return AdapterFolder(rank, targets, max(1, -(-weights[0].stat().st_size // 2**20)))


def base_modules(folder: Path) -> set[str] | None:
    """Module names of the model whose weights lie in ``folder`` (from the safetensors headers:
    ``a.b.c.weight`` -> ``a.b.c``); None when it holds no safetensors files."""
    files = sorted(folder.glob("*.safetensors")) if folder.is_dir() else []
    if not files:
        return None
    from safetensors import safe_open

    modules: set[str] = set()
    for file in files:
        with safe_open(str(file), framework="np") as weights:
            modules.update(name.rpartition(".")[0] for name in weights.keys())  # noqa: SIM118
    return modules


def check_fits(adapter: AdapterFolder, modules: set[str], field: str = "path") -> None:
    """ValidationError naming ``field`` when a target module is absent from the base."""
    if isinstance(adapter.targets, str):
        pattern = re.compile(adapter.targets)
        if not any(pattern.fullmatch(m) for m in modules):
            raise ValidationError(
                field, adapter.targets, "target_modules matches no module of the base model"
            )
        return
    names = {m.rpartition(".")[2] for m in modules} | modules
    missing = [t for t in adapter.targets if t not in names]
    if missing:
        raise ValidationError(
            field, missing, "target_modules names modules the base model does not have"
        )
