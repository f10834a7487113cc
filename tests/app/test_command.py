"""``legato console``: the Streamlit command line and the environment it hands the console."""

from __future__ import annotations

from pathlib import Path

import typer
from pydantic import SecretStr
from typer.testing import CliRunner

from control.commands import console as cmd
from control.config import Settings


def test_launch_passes_api_url_port_and_token_from_settings(tmp_path: Path) -> None:
    settings = Settings(var_dir=tmp_path, api_host="127.0.0.1", api_port=9100, console_port=9101,
                        admin_token=SecretStr("s3cret"))  # fmt: skip
    launch = cmd.console_launch(settings, {"PATH": "/bin", "LEGATO_ADMIN_TOKEN": "stale"})
    assert launch.env["LEGATO_API_URL"] == "http://127.0.0.1:9100"
    assert launch.env["LEGATO_ADMIN_TOKEN"] == "s3cret"
    assert launch.argv[launch.argv.index("--server.port") + 1] == "9101"
    assert Path(launch.argv[4]) == Path(__file__).resolve().parents[2] / "app" / "main.py"


def test_token_falls_back_to_the_var_file_and_then_to_none(tmp_path: Path) -> None:
    settings = Settings(var_dir=tmp_path, api_host="0.0.0.0")
    launch = cmd.console_launch(settings, {"LEGATO_ADMIN_TOKEN": "stale"})
    assert "LEGATO_ADMIN_TOKEN" not in launch.env  # a stale one is never passed on
    assert launch.env["LEGATO_API_URL"].startswith("http://127.0.0.1:")
    (tmp_path / "admin_token").write_text("from-file\n")
    assert cmd.console_launch(settings, {}).env["LEGATO_ADMIN_TOKEN"] == "from-file"


def test_register_adds_the_console_command() -> None:
    app = typer.Typer()
    app.command("noop")(lambda: None)
    cmd.register(app)
    result = CliRunner().invoke(app, ["console", "--help"])
    assert result.exit_code == 0 and "operator console" in result.output
