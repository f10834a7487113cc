"""``legato sim casestudy``: the seed case studies replayed in the twin (see :mod:`sim.casestudy`).

Prints the twin's figures beside the seed documents' and, for each figure, the mechanism that
accounts for a difference. ``--json`` prints the object ``bench/casestudies.py`` prints.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

StudyArg = Annotated[str, typer.Argument(help="rag, agent or all")]
SeedsOpt = Annotated[
    str | None, typer.Option("--seeds", help="Comma-separated seeds (default: the scenario's).")
]
RequestsOpt = Annotated[
    int | None, typer.Option("--requests", min=10, help="Trace requests per replay (a slice).")
]
CapacityOpt = Annotated[
    int, typer.Option("--capacity-requests", min=10, help="Requests of each capacity replay.")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
STUDIES = ("rag", "agent", "all")


def casestudy(
    study: StudyArg = "all",
    seeds: SeedsOpt = None,
    requests: RequestsOpt = None,
    capacity_requests: CapacityOpt = 200,
    as_json: JsonOpt = False,
) -> None:
    """Replay the seed's enterprise-RAG and data-analysis-agent case studies on their fleets."""
    from sim.casestudy import NOTES, SEED, agent_case, rag_case

    if study not in STUDIES:
        raise typer.BadParameter(f"{study!r}: one of {', '.join(STUDIES)}", param_hint="STUDY")
    picked = tuple(int(s) for s in seeds.split(",")) if seeds else None
    out: dict = {}
    if study in ("rag", "all"):
        out["rag"] = rag_case(
            seeds=picked, max_requests=requests, capacity_requests=capacity_requests
        )
    if study in ("agent", "all"):
        out["agent"] = agent_case(seeds=picked, max_requests=requests)
    if as_json:
        typer.echo(json.dumps({**out, "seed_figures": SEED, "notes": NOTES}, indent=2))
        return
    for name, figures in out.items():
        typer.echo(f"== {name} ==")
        for key, value in figures.items():
            if key in SEED:
                typer.echo(f"{key:26} twin {value!s:>8}   seed {SEED[key]:.2f}")
                typer.echo(f"  why: {NOTES[key]}")
            else:
                typer.echo(f"{key:26} {value}")


def register(sim_app: typer.Typer) -> None:
    sim_app.command("casestudy")(casestudy)
