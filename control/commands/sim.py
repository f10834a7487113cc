"""``legato sim``: run a scenario, compare variants, validate the twin against the live stack."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

sim_app = typer.Typer(
    help="The digital twin: replay traces through the decision core.", no_args_is_help=True
)

ScenarioArg = Annotated[
    str,
    typer.Argument(help="Scenario file (YAML/JSON) or a shipped name: rag_enterprise, agent_dag."),
]
SeedsOpt = Annotated[
    str | None, typer.Option("--seeds", help="Comma-separated seeds (default: the scenario's).")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def _seeds(text: str | None) -> list[int] | None:
    return [int(s) for s in text.split(",")] if text else None


def _bar(total: int):  # noqa: ANN202
    bar = typer.progressbar(length=total, label="twin", file=None)
    bar.__enter__()
    state = {"done": 0}

    def progress(done: int, _total: int, label: str) -> None:
        bar.label = label
        bar.update(done - state["done"])
        state["done"] = done
        if done >= _total:
            bar.__exit__(None, None, None)

    return progress


@sim_app.command("run")
def run(scenario: ScenarioArg, seeds: SeedsOpt = None, as_json: JsonOpt = False) -> None:
    """Replay one scenario over its seeds and print its report."""
    from sim.scenario_io import read_scenario_dict, scenario_from_dict
    from sim.whatif import run_scenario

    raw = read_scenario_dict(scenario)
    raw.pop("variants", None)
    sc = scenario_from_dict(raw)
    chosen = _seeds(seeds) or list(sc.seeds)
    report = run_scenario(sc, seeds=chosen, progress=None if as_json else _bar(len(chosen)))
    if as_json:
        typer.echo(json.dumps(report.to_dict() | {"digest": report.digest()}))
        return
    for key, stat in report.metrics.items():
        if key.startswith(("all.", "fleet.", "fairness.")):
            typer.echo(f"{key:<40} {stat.mean:>14.4f} ± {stat.ci95:.4f}")


@sim_app.command("compare")
def compare_cmd(
    scenario: ScenarioArg,
    variants: Annotated[
        Path | None,
        typer.Option(
            "--variants",
            help="YAML/JSON of name -> changes (default: the scenario's own 'variants').",
        ),
    ] = None,
    seeds: SeedsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Baseline vs variants on the same trace and seeds: delta table and verdict."""
    from sim.scenario_io import read_scenario_dict
    from sim.whatif import compare

    raw = read_scenario_dict(scenario)
    own = raw.pop("variants", None) or {}
    chosen = read_scenario_dict(variants) if variants else own
    if not chosen:
        raise typer.BadParameter(
            "no variants: give --variants or a scenario with a 'variants' section"
        )
    n = len(_seeds(seeds) or raw.get("seeds") or [0, 1, 2]) * (1 + len(chosen))
    base, comps = compare(raw, chosen, seeds=_seeds(seeds), progress=None if as_json else _bar(n))
    if as_json:
        typer.echo(
            json.dumps(
                {"baseline_digest": base.digest(), "comparisons": [c.to_dict() for c in comps]}
            )
        )
        return
    for c in comps:
        typer.echo(f"\n{c.name}")
        typer.echo(f"{'metric':<34}{'baseline':>12}{'variant':>12}{'delta':>12}{'± 95%':>10}")
        for r in c.rows:
            typer.echo(
                f"{r.metric:<34}{r.baseline:>12.4f}{r.variant:>12.4f}{r.delta:>12.4f}{r.ci95:>10.4f}"
            )
        typer.echo(c.verdict)


# the options of ``sim validate``, declared once each (as ScenarioArg and SeedsOpt above)
RequestsOpt = Annotated[int, typer.Option(min=2, help="Requests of the trace slice.")]
RateFactorOpt = Annotated[
    float | None,
    typer.Option(
        help="Trace time scaling (x faster); default: chosen from the measured "
        "table so the slice offers --load of the worker."
    ),
]
LoadOpt = Annotated[
    str,
    typer.Option(
        help="Offered load(s), fractions of measured capacity, e.g. 0.3,0.7,0.9 "
        "(embed: the first, when no --rate-factor)."
    ),
]
WorkflowOpt = Annotated[
    str, typer.Option(help="embed (one MiniLM worker), or rag / agent: the whole DAG.")
]
TraceOpt = Annotated[
    str | None,
    typer.Option(
        help="rag/agent: a trace file (Azure CSV or Mooncake JSONL) or a shipped "
        "slice's name (default azure_code)."
    ),
]
TraceFormatOpt = Annotated[
    str | None, typer.Option(help="azure or mooncake (default: from the file's suffix).")
]
SloOpt = Annotated[
    float | None,
    typer.Option(help="End-to-end SLO in seconds (default 0.1 for embed, 2.0 for rag/agent)."),
]
RepeatsOpt = Annotated[
    int, typer.Option(min=1, max=5, help="Independent runs; figures are their medians.")
]
StoreOpt = Annotated[bool, typer.Option("--store", help="Store the result as a fidelity report.")]
UrlOpt = Annotated[
    str | None, typer.Option("--url", help="Database for --store (default: configured).")
]
ModelSourceOpt = Annotated[
    str, typer.Option(hidden=True, help="minilm, or tiny (a random tiny BERT, for tests)")
]
RoundsOpt = Annotated[
    int, typer.Option(min=1, max=20, help="Replays of the slice per run, each between profiles.")
]
RaisePriorityOpt = Annotated[
    bool,
    typer.Option(
        "--raise-priority/--no-raise-priority",
        help="Run the live side at nice -10 (needs root; restored afterwards) so other "
        "work on the machine disturbs the measurement less.",
    ),
]
QuickOpt = Annotated[bool, typer.Option(hidden=True, help="a small profile grid (tests)")]


@sim_app.command("validate")
def validate(
    as_json: JsonOpt = False,
    requests: RequestsOpt = 120,
    rate_factor: RateFactorOpt = None,
    load: LoadOpt = "0.5",
    slo_s: SloOpt = None,
    repeats: RepeatsOpt = 1,
    store: StoreOpt = False,
    url: UrlOpt = None,
    model_source: ModelSourceOpt = "minilm",
    rounds: RoundsOpt = 10,
    raise_priority: RaisePriorityOpt = True,
    quick: QuickOpt = False,
    workflow: WorkflowOpt = "embed",
    trace: TraceOpt = None,
    trace_format: TraceFormatOpt = None,
) -> None:
    """Fidelity: the same trace slice through the live stack (real executor, MiniLM on one CPU
    worker slot) and through the twin with tables measured in that worker; prints p50/p99
    error and the SLO attainment error. About two and a half minutes per run. With
    ``--workflow rag|agent``: the whole DAG, per stage and end to end, at each --load."""
    from control.commands.sim_dag import embed_load, validate_dag_cmd

    if workflow != "embed":
        validate_dag_cmd(workflow, load, requests, trace, trace_format, model_source, quick,
                         slo_s, as_json, url if store else None, store)  # fmt: skip
        return
    from control.services.fidelity import (
        TRACE,
        FidelityConfig,
        config_dict,
        validate_repeated,
    )

    small = {"profile_batch_sizes": (1, 2), "profile_tokens": (8, 32), "profile_repeats": 1,
             "calibration_requests": 1, "twin_draws": 2} if quick else {}  # fmt: skip
    cfg = FidelityConfig(rate_factor=rate_factor, target_utilization=embed_load(load, trace), max_requests=requests,
                         slo_s=0.1 if slo_s is None else slo_s, model_source=model_source,
                         slice_repeats=1 if quick else rounds,
                         nice=-10 if raise_priority else None, **small)  # fmt: skip
    result = validate_repeated(cfg, repeats)
    if store:
        stored = config_dict(cfg) | {"repeats": repeats, "workflow": "embed"}
        result["report_id"] = _store_report(url, TRACE, stored, result)
    if as_json:
        typer.echo(json.dumps(result))
        return
    for k, v in result.items():
        if k != "runs":
            typer.echo(f"{k}: {v}")


def _store_report(url: str | None, trace: str, config: dict, result: dict) -> int:
    """Write ``result`` as a fidelity report in the database at ``url`` (default: the
    configured one); returns its id."""
    from control.config import get_settings
    from control.services.fidelity_reports import FidelityReportService
    from db.session import make_engine, make_session_factory

    factory = make_session_factory(make_engine(url or get_settings().resolved_database_url()))
    return FidelityReportService(factory).store("legato-sim-validate", trace, config, result).id


from control.commands import sim_casestudy  # noqa: E402  (its command joins sim_app)

sim_casestudy.register(sim_app)


def register(app: typer.Typer) -> None:
    """Add the ``sim`` sub-commands to the ``legato`` app."""
    app.add_typer(sim_app, name="sim")
