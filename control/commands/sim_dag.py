"""``legato sim validate --workflow rag|agent``: the whole-DAG fidelity check from the command
line (``control.services.fidelity.dag_validate``), printed and optionally stored."""

from __future__ import annotations

import json

import typer


def loads_of(text: str) -> list[float]:
    """``0.3,0.7,0.9`` -> [0.3, 0.7, 0.9]; BadParameter names a load outside (0, 1)."""
    try:
        loads = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise typer.BadParameter(
            f"{text!r}: comma-separated numbers", param_hint="--load"
        ) from None
    if not loads or any(not 0.05 <= x <= 0.95 for x in loads):
        raise typer.BadParameter(f"{text!r}: each load in 0.05..0.95", param_hint="--load")
    return loads


def embed_load(load: str, trace: str | None) -> float:
    """The embed-only check's one load; BadParameter for a list or a --trace (that check
    replays its own shipped slice)."""
    if trace is not None:
        raise typer.BadParameter("--trace needs --workflow rag or agent", param_hint="--trace")
    loads = loads_of(load)
    if len(loads) != 1:
        raise typer.BadParameter(f"{load!r}: embed takes one load", param_hint="--load")
    return loads[0]


def validate_dag_cmd(  # noqa: PLR0913
    workflow: str, load: str, requests: int, trace: str | None, trace_format: str | None,
    model_source: str, quick: bool, slo_s: float | None, as_json: bool, url: str | None, store: bool,
) -> None:  # fmt: skip
    from control.services.fidelity.dag_validate import validate_dag
    from control.services.fidelity.dag_world import DagFidelityConfig

    small = {"calibration_sizes": (1, 2), "calibration_repeats": 1} if quick else {}
    try:
        cfg = DagFidelityConfig(workflow=workflow, requests=requests, trace=trace or "azure_code",
                                trace_format=trace_format, slo_s=2.0 if slo_s is None else slo_s,
                                model_source="tiny" if model_source == "tiny" else "real",
                                **small)  # fmt: skip
        result = validate_dag(cfg, loads_of(load))
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    if store:
        from control.commands.sim import _store_report

        stored = {"workflow": workflow, "loads": result["loads"], "load": result["load"],
                  "requests": requests, "trace_format": trace_format, "quick": quick}  # fmt: skip
        result["report_id"] = _store_report(url, result["trace"], stored, result)
    if as_json:
        typer.echo(json.dumps(result))
        return
    for row in result["per_load"]:
        typer.echo(f"load {row['load']}: e2e p50 error {row['p50_error']:.1%}, "
                   f"p99 error {row['p99_error']:.1%}, worst stage {row['worst_stage']}")  # fmt: skip
        for node, s in row["stages"].items():
            typer.echo(f"  {node:<10} p50 {s['p50_error']:.1%}  p99 {s['p99_error']:.1%}")
