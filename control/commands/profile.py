"""``legato profile``: measure latency tables of the local models and store them.

For every active model with local weights (or the ones named with ``--model``) it runs the
executor's profiler on this machine (one core, one torch thread, like a worker), then writes one
``model_latency_profiles`` row per (device type, batch size, tokens) point through the audited
service (an existing point is updated) and the raw rows as CSV under ``<var_dir>/profiles/``.
The twin and the live core read the rows back through ``load_fleet_state``.

Precision variants (issue 27): ``--variant int8`` (repeatable) profiles those registered,
active variants of each model, ``--variants`` all of them. Per variant it stores the latency
rows (``variant=<precision>``), the measured memory and load time, and the quality JSON against
the fp32 base (see :mod:`control.executor.variant_profile`); CSV as ``<key>@<precision>.csv``.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Annotated

import typer

ACTOR = "legato-profile"
VariantOption = Annotated[
    list[str] | None,
    typer.Option("--variant", help="profile this registered precision variant (repeatable)"),
]
AllVariantsOption = Annotated[
    bool, typer.Option("--variants", help="profile every active variant of each model")
]


def _store(services, model_id: int, rows, variant: str = "") -> int:  # noqa: ANN001
    """Upsert one DB point per (device type, batch, tokens) of ``variant`` ("": the base);
    returns how many were written."""
    points: dict[tuple[str, int, int], dict] = {}
    for r in rows:
        point = points.setdefault((r.device_type, r.batch_size, r.input_tokens), {})
        if r.phase in ("forward", "prefill"):
            point["latency_us"] = r.latency_us
        else:
            point["decode_us_per_token"] = r.latency_us
    existing = {
        (p.device_type, p.batch_size, p.num_tokens): p
        for p in services.latency_profiles.list(model_id=model_id, variant=variant)
    }
    for (dtype, batch, tokens), values in sorted(points.items()):
        values.setdefault("latency_us", 0)
        current = existing.get((dtype, batch, tokens))
        if current is None:
            services.latency_profiles.create(
                ACTOR, model_id=model_id, device_type=dtype, batch_size=batch, num_tokens=tokens,
                variant=variant, **values,
            )  # fmt: skip
        else:
            services.latency_profiles.update(ACTOR, current.id, **values)
    return len(points)


def _write_csv(folder: Path, model_key: str, rows) -> Path:  # noqa: ANN001
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{model_key.replace(':', '_').replace('/', '_')}.csv"
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0].as_dict()))
        writer.writeheader()
        writer.writerows(r.as_dict() for r in rows)
    return path


def profile(
    model: Annotated[
        list[str] | None, typer.Option("--model", help="name:version to profile")
    ] = None,
    batch_sizes: Annotated[str, typer.Option(help="comma-separated batch sizes")] = "1,2,4,8",
    tokens: Annotated[str, typer.Option(help="comma-separated prompt lengths")] = "16,64",
    repeats: Annotated[int, typer.Option(min=1, help="timed runs per point")] = 3,
    device: Annotated[str, typer.Option(help="'cpu' or 'cuda:N'")] = "cpu",
    variant: VariantOption = None,
    variants: AllVariantsOption = False,
) -> None:
    """Measure latency tables for the local devices; store them in the database and as CSV."""
    import torch

    from control.config import get_settings
    from control.executor.profile import profile_model
    from control.services import build_services
    from control.services.fleet_state import load_fleet_state
    from control.wiring.services import session_factory
    from db.session import session_scope

    settings = get_settings()
    torch.set_num_threads(settings.torch_threads)
    if device == "cpu" and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core, like a worker slot
    factory = session_factory(settings.resolved_database_url())
    with session_scope(factory) as session:
        fleet = load_fleet_state(session, include_declared=False)
    services = build_services(factory)
    ids = {f"{m.name}:{m.version}": m.id for m in services.models.list()}
    wanted = model or sorted(fleet.model_refs)
    unknown = [k for k in wanted if k not in fleet.model_refs]
    if unknown:
        typer.echo(f"error: no local weights for {', '.join(unknown)}", err=True)
        raise typer.Exit(1)
    grid = ([int(x) for x in batch_sizes.split(",")], [int(x) for x in tokens.split(",")])
    cache = settings.var_dir / "models"
    for key in wanted:
        if variant or variants:
            wanted_variants = _variants_of(services, ids[key], key, variant or None)
            _profile_variants(services, settings, fleet.model_refs[key], ids[key], key,
                              wanted_variants, device, *grid, repeats, cache)  # fmt: skip
            continue
        rows = profile_model(fleet.model_refs[key], device, *grid, repeats=repeats,
                             cache_dir=cache)  # fmt: skip
        written = _store(services, ids[key], rows)
        typer.echo(f"{key}: {written} point(s) stored, rows in "
                   f"{_write_csv(settings.var_dir / 'profiles', key, rows)}")  # fmt: skip


def _variants_of(services, model_id: int, key: str, named: list[str] | None) -> list:  # noqa: ANN001
    """The active variant records to profile: those ``named``, or all; exits naming a
    precision that is not a registered, active variant of the model."""
    active = {v.precision: v for v in services.variants.of_model(model_id)}
    missing = [p for p in named or () if p not in active]
    if missing:
        typer.echo(f"error: {key} has no active variant {', '.join(missing)} (register it: "
                   f"POST /admin/models/{model_id}/variants)", err=True)  # fmt: skip
        raise typer.Exit(1)
    return [active[p] for p in named] if named else list(active.values())


def _profile_variants(services, settings, ref, model_id, key, records, device, sizes, lengths,
                      repeats, cache) -> None:  # fmt: skip  # noqa: ANN001
    """Profile ``records`` (variants of ``ref``) and store each one's rows and measurement."""
    from control.executor.variant_profile import profile_variants

    found = profile_variants(ref, [v.precision for v in records], device, sizes, lengths,
                             repeats=repeats, cache_dir=cache)  # fmt: skip
    for record, measured in zip(records, found, strict=True):
        written = _store(services, model_id, measured.rows, variant=measured.precision)
        services.variants.record_measurement(
            ACTOR, record.id, memory_mib=measured.memory_mib,
            load_time_ms=measured.load_time_ms, quality=measured.quality,
        )  # fmt: skip
        name = f"{key}@{measured.precision}"
        path = _write_csv(settings.var_dir / "profiles", name, measured.rows)
        q = measured.quality
        typer.echo(f"{name}: {written} point(s), {measured.memory_mib} MiB, load "
                   f"{measured.load_time_ms} ms, {q['metric']} {q['score']:.4f}; rows in {path}")  # fmt: skip


def register(app: typer.Typer) -> None:
    """Add ``profile`` to the ``legato`` command."""
    app.command("profile")(profile)
