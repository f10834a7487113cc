"""`legato sim validate`: the whole check end to end on a tiny random BERT (the real executor,
runtime and twin; only the model is small), printing JSON and storing a fidelity report."""

from __future__ import annotations

import json
import math

from typer.testing import CliRunner

from control.cli import app
from control.services.fidelity_reports import FidelityReportService
from db import migrate
from db.session import make_engine, make_session_factory

runner = CliRunner()


def test_validate_prints_the_figures_and_stores_a_report(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'legato.db'}"
    migrate.upgrade(url)
    args = ["sim", "validate", "--json", "--store", "--url", url, "--requests", "8",
            "--model-source", "tiny", "--quick"]  # fmt: skip
    out = runner.invoke(app, args)
    assert out.exit_code == 0, out.output
    result = json.loads(out.output.strip().splitlines()[-1])
    for key in ("p50_error", "p99_error", "slo_attainment_error_pp"):
        assert math.isfinite(result[key])
    assert result["live"]["succeeded"] == 8 and result["twin"]["succeeded"] == 8
    assert result["profile_rows"] == 4  # 2 batch sizes x 2 lengths, measured in the worker
    assert result["machine"] == "quiet" or result["machine"].startswith("noisy: ")
    stored = FidelityReportService(make_session_factory(make_engine(url))).latest()
    assert stored.id == result["report_id"] and stored.trace == "azure_code"
    assert stored.p99_error == result["p99_error"]
    assert stored.config["model_source"] == "tiny" and stored.config["repeats"] == 1
    assert stored.live["p50_s"] == result["live"]["p50_s"]
