"""The whole stack as subprocesses (API on a seeded SQLite file, Streamlit console) and a
headless Debian Chromium driven by Playwright: shared by the browser test and the benchmark."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.app.stack import free_port

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip
TOKEN = "browser-admin-token-0123456789"
#: Page title in the navigation -> heading the page shows.
PAGES = {
    "Overview": "Overview",
    "Fair share, live": "Fair share, live",
    "Devices and headroom": "Devices and headroom",
    "Models and placement": "Models and placement",
    "Workflows": "Workflows",
    "Tenants and quotas": "Tenants and quotas",
    "What-if": "What-if",
    "Usage and audit": "Usage and audit",
    "Request timeline": "Request timeline",
}


@dataclass
class Stack:
    api_url: str
    console_url: str
    token: str
    root: Path


def browser_missing() -> str | None:
    """Why the browser test cannot run here, or None."""
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} is missing (apt-get install -y chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed"
    return None


def _wait(url: str, proc: subprocess.Popen, what: str, timeout_s: float = 120.0) -> None:
    for _ in range(int(timeout_s / 0.25)):
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=1.0).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        subprocess.run(["sleep", "0.25"], check=False)
    raise RuntimeError(f"{what} did not answer at {url} within {timeout_s} s")


@contextmanager
def running_stack(
    root: Path, *, live: bool = True, tenants: int = 0, api_args: tuple[str, ...] = ()
) -> Iterator[Stack]:
    """API (``tests.app.stack``, with ``api_args`` added) and console subprocesses on free
    ports; stopped on exit."""
    root.mkdir(parents=True, exist_ok=True)
    api_port, console_port = free_port(), free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    api_cmd = [sys.executable, "-m", "tests.app.stack", "--db", str(root / "legato.db"),
               "--port", str(api_port), "--token", TOKEN, "--tenants", str(tenants),
               *api_args]  # fmt: skip
    procs = []
    with open(root / "api.log", "w") as api_log, open(root / "console.log", "w") as ui_log:
        try:
            procs.append(subprocess.Popen(api_cmd + (["--live"] if live else []), cwd=ROOT,
                                          env=env, stdout=api_log, stderr=subprocess.STDOUT))  # fmt: skip
            api_url = f"http://127.0.0.1:{api_port}"
            _wait(f"{api_url}/healthz", procs[0], "the API")
            ui_env = {**env, "LEGATO_API_URL": api_url, "LEGATO_VAR_DIR": str(root / "var")}
            ui_env.pop("LEGATO_ADMIN_TOKEN", None)
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "streamlit", "run", str(ROOT / "app" / "main.py"),
                 "--server.port", str(console_port), "--server.headless", "true",
                 "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
                cwd=ROOT, env=ui_env, stdout=ui_log, stderr=subprocess.STDOUT))  # fmt: skip
            console_url = f"http://127.0.0.1:{console_port}"
            _wait(f"{console_url}/_stcore/health", procs[1], "the console")
            yield Stack(api_url, console_url, TOKEN, root)
        finally:
            for proc in reversed(procs):
                proc.terminate()
            for proc in procs:
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()


@contextmanager
def chromium_page(width: int = 1500, height: int = 1000) -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.set_default_timeout(30_000)
            yield page
        finally:
            browser.close()


def sign_in(page, stack: Stack) -> None:  # noqa: ANN001
    page.goto(stack.console_url)
    page.get_by_label("Admin credential").fill(stack.token)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("heading", name="Overview").wait_for()


def open_page(page, title: str) -> None:  # noqa: ANN001
    """Click the page in the navigation and wait for its heading."""
    page.locator('[data-testid="stSidebarNav"]').get_by_text(title, exact=True).click()
    page.get_by_role("heading", name=PAGES[title], exact=True).wait_for()


def settle(page, timeout_ms: int = 20_000) -> None:  # noqa: ANN001
    """Wait until Streamlit stops running the script (the status widget disappears)."""
    status = page.locator('[data-testid="stStatusWidget"]')
    page.wait_for_timeout(300)
    status.wait_for(state="hidden", timeout=timeout_ms)
    # A rerun may start just after the first check (fragments, reruns after a click).
    page.wait_for_timeout(200)
    status.wait_for(state="hidden", timeout=timeout_ms)


def clean(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
