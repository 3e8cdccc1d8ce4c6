"""Real-browser fixtures: a live dashboard (serve.py, which runs `streamlit run app.py`) and Debian's chromium via pytest-playwright.

Every test under tests/e2e/ is marked ``e2e`` and skipped (with a reason) when the chromium
binary is missing. CI (.ci/run) installs it with apt. Override the path with $CHROMIUM.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from live_app import free_port, healthy   # tests/e2e is on sys.path (pytest's rootdir insertion)

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROME_FLAGS = [
    "--no-sandbox",  # we run as root
    "--disable-gpu",  # WebGL still works through SwiftShader
    "--disable-dev-shm-usage",
    "--disable-background-networking",  # closed network: no calls home
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
    "--disable-default-apps",
    "--disable-extensions",
    "--mute-audio",
]
STARTUP_TIMEOUT_S = 60

_server_log: Path | None = None


def _in_e2e(item: pytest.Item) -> bool:
    return HERE in Path(str(item.path)).resolve().parents


def pytest_collection_modifyitems(config, items):
    have_browser = os.path.exists(CHROMIUM)
    skip = pytest.mark.skip(
        reason=f"chromium not found at {CHROMIUM}: apt-get install chromium chromium-driver (CI does)"
    )
    for item in items:
        if _in_e2e(item):
            item.add_marker(pytest.mark.e2e)
            if not have_browser:
                item.add_marker(skip)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Attach the tail of the Streamlit server log to failing e2e tests."""
    outcome = yield
    rep = outcome.get_result()
    if rep.failed and _server_log is not None and _in_e2e(item) and _server_log.exists():
        tail = _server_log.read_text(errors="replace")[-8000:]
        rep.sections.append(("streamlit server log (tail)", tail))


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)  # only the process group we started
        proc.wait(10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)
    except ProcessLookupError:
        pass


@pytest.fixture(scope="session")
def app_url():
    """Base URL of a headless dashboard started as the README says (serve.py: `streamlit run app.py`
    with the pages' modules imported first) from the repo root."""
    global _server_log
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    fd, log_path = tempfile.mkstemp(prefix="streamlit-e2e-", suffix=".log")
    _server_log = Path(log_path)
    env = {**os.environ, "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false", "PYTHONUNBUFFERED": "1"}
    with os.fdopen(fd, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "serve.py",
             "--server.headless", "true",
             "--server.port", str(port),
             "--server.address", "127.0.0.1",
             "--browser.gatherUsageStats", "false",
             "--server.fileWatcherType", "none"],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=env, start_new_session=True,
        )
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not healthy(url):
            if proc.poll() is not None or time.monotonic() > deadline:
                why = (f"exited with code {proc.returncode}" if proc.poll() is not None
                       else f"not healthy after {STARTUP_TIMEOUT_S}s")
                _stop(proc)
                log_text = _server_log.read_text(errors="replace")[-8000:]
                pytest.fail(f"streamlit server {why}; log {log_path}:\n{log_text}", pytrace=False)
            time.sleep(0.2)
        yield url
    finally:
        _stop(proc)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    """pytest-playwright hook: use Debian's chromium, never a downloaded browser."""
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROME_FLAGS}


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    # Streamlit scrolls an inner div, so full_page screenshots don't grow: use a tall viewport.
    return {**browser_context_args, "viewport": {"width": 1400, "height": 2000}}
