"""``legato console``: the Streamlit command line, the environment it hands the console (never a
credential), and the one-time sign-in link it prints."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlparse

import typer
from pydantic import SecretStr
from typer.testing import CliRunner

from app import links
from control.clock import wall_time
from control.commands import console as cmd
from control.config import Settings


def test_launch_passes_api_url_and_port_but_never_the_credential(tmp_path: Path) -> None:
    settings = Settings(var_dir=tmp_path, api_host="127.0.0.1", api_port=9100, console_port=9101,
                        admin_token=SecretStr("s3cret"))  # fmt: skip
    env = {"PATH": "/bin", "LEGATO_ADMIN_TOKEN": "s3cret", "LEGATO_KEY_PEPPER": "pepper"}
    launch = cmd.console_launch(settings, env)
    assert launch.env["LEGATO_API_URL"] == "http://127.0.0.1:9100"
    assert launch.env["LEGATO_VAR_DIR"] == str(tmp_path)
    # a credential the Streamlit process held would sign in every browser (issue #22)
    assert "LEGATO_ADMIN_TOKEN" not in launch.env and "LEGATO_KEY_PEPPER" not in launch.env
    assert "s3cret" not in " ".join([*launch.argv, *launch.env.values()])
    assert launch.argv[launch.argv.index("--server.port") + 1] == "9101"
    assert Path(launch.argv[4]) == Path(__file__).resolve().parents[2] / "app" / "main.py"


def test_credential_file_is_never_passed_on_and_the_url_is_local(tmp_path: Path) -> None:
    settings = Settings(var_dir=tmp_path, api_host="0.0.0.0")
    (tmp_path / "admin_token").write_text("from-file\n")
    launch = cmd.console_launch(settings, {"LEGATO_ADMIN_TOKEN": "stale"})
    assert "LEGATO_ADMIN_TOKEN" not in launch.env
    assert launch.env["LEGATO_API_URL"].startswith("http://127.0.0.1:")


def test_sign_in_link_redeems_once_to_the_admin_credential(tmp_path: Path) -> None:
    settings = Settings(var_dir=tmp_path, api_host="127.0.0.1", console_port=9101)
    assert cmd.sign_in_link(settings) is None  # no credential known: no link
    (tmp_path / "admin_token").write_text("from-file\n")
    link = cmd.sign_in_link(settings)
    assert link is not None and link.startswith("http://127.0.0.1:9101/?ticket=")
    token = parse_qs(urlparse(link).query)["ticket"][0]
    assert links.redeem(tmp_path, token, wall_time(), 60) == "from-file"
    assert links.redeem(tmp_path, token, wall_time(), 60) is None


def test_register_adds_the_console_command() -> None:
    app = typer.Typer()
    app.command("noop")(lambda: None)
    cmd.register(app)
    result = CliRunner().invoke(app, ["console", "--help"])
    assert result.exit_code == 0 and "operator console" in result.output
