"""The ``legato`` command.

Each command is a thin edge: it reads the settings once, calls one service or driver, and turns a
domain error into a sentence on stderr with a non-zero exit status.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Annotated, TypeVar

import typer

from control import native
from control.commands import register_all
from control.config import get_settings

app = typer.Typer(
    help="Legato: a control plane for multi-model inference.",
    no_args_is_help=True,
    add_completion=False,
)
db_app = typer.Typer(
    help="The control-plane database: migrations and drift checks.", no_args_is_help=True
)
app.add_typer(db_app, name="db")


@app.callback()
def _native_core() -> None:
    # Runs before every command: those that run the core (sim, api, serve, profile, loadgen)
    # get the compiled one when a current native build exists. The command modules import
    # none of the core at import time, so nothing compiled is imported before this.
    native.install()


T = TypeVar("T")


def _fail(message: str, code: int = 1) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def _run_domain(fn: Callable[[], T]) -> T:
    """Call ``fn``; a domain error becomes one sentence on stderr and exit status 1."""
    from control.services.errors import DomainError

    try:
        return fn()
    except DomainError as exc:
        _fail(str(exc))
        raise  # unreachable: _fail raises


def _database_url(url: str | None) -> str:
    return url or get_settings().resolved_database_url()


UrlOption = Annotated[
    str | None, typer.Option("--url", help="Database URL (default: LEGATO_DATABASE_URL or ./var).")
]


@db_app.command("upgrade")
def db_upgrade(url: UrlOption = None, revision: str = "head") -> None:
    """Apply migrations up to REVISION (default: the newest)."""
    from db.migrate import upgrade

    target = _database_url(url)
    upgrade(target, revision)
    typer.echo(f"database at revision {revision}: {_redact(target)}")


@db_app.command("current")
def db_current(url: UrlOption = None) -> None:
    """Print the revision the database is at (nothing applied: 'none')."""
    from db.migrate import current

    typer.echo(current(_database_url(url)) or "none")


@db_app.command("check")
def db_check(url: UrlOption = None) -> None:
    """Fail when the models and the migrated schema differ (a migration is missing)."""
    from db.migrate import check

    problems = check(_database_url(url))
    if problems:
        for line in problems:
            typer.echo(line, err=True)
        _fail(f"{len(problems)} difference(s) between the models and the database schema")
    typer.echo("no drift: the schema matches the models")


@app.command("seed")
def seed(
    demo: Annotated[
        bool, typer.Option("--demo", help="Seed the demo fleet, tenants, workflows.")
    ] = False,
    url: UrlOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Seed the database. Idempotent: a second run changes nothing."""
    if not demo:
        _fail("nothing to seed: pass --demo to seed the demo fleet", code=2)
    from control.services.seed import seed_demo

    summary = _run_domain(lambda: seed_demo(_database_url(url), get_settings()))
    if as_json:
        typer.echo(json.dumps(summary, indent=2, sort_keys=True))
    else:
        for key, value in summary.items():
            typer.echo(f"{key}: {value}")


def _redact(url: str) -> str:
    """A URL with any password replaced, for printing."""
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


register_all(app)


def main() -> None:  # pragma: no cover - console entry point
    app(prog_name="legato")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
