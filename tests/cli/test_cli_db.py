"""The `legato` command line: database commands and clear errors with non-zero exits."""

from __future__ import annotations

import sqlite3

from typer.testing import CliRunner

from control.cli import app

runner = CliRunner()


def test_db_upgrade_current_check_on_a_fresh_sqlite_file(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'var' / 'legato.db'}"
    before = runner.invoke(app, ["db", "current", "--url", url])
    assert before.exit_code == 0 and before.output.strip() == "none"
    up = runner.invoke(app, ["db", "upgrade", "--url", url])
    assert up.exit_code == 0, up.output
    assert runner.invoke(app, ["db", "current", "--url", url]).output.strip() != "none"
    check = runner.invoke(app, ["db", "check", "--url", url])
    assert check.exit_code == 0 and "no drift" in check.output


def test_db_check_fails_with_a_sentence_on_drift(tmp_path) -> None:
    path = tmp_path / "legato.db"
    url = f"sqlite:///{path}"
    assert runner.invoke(app, ["db", "upgrade", "--url", url]).exit_code == 0
    with sqlite3.connect(path) as conn:  # a change made behind the migrations' back
        conn.execute("ALTER TABLE tenants ADD COLUMN nickname VARCHAR(20)")
    result = runner.invoke(app, ["db", "check", "--url", url])
    assert result.exit_code == 1
    assert "difference" in result.output and "nickname" in result.output


def test_seed_without_a_target_is_refused(tmp_path) -> None:
    result = runner.invoke(app, ["seed", "--url", f"sqlite:///{tmp_path / 'x.db'}"])
    assert result.exit_code == 2
    assert "pass --demo" in result.output
    assert not (tmp_path / "x.db").exists()  # nothing written
