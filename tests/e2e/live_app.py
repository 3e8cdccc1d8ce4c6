"""A dashboard started for one test with its own environment (SCHEDLAB_DATA_DIR: the server's
data folder), as conftest's app_url starts the shared one: serve.py, headless, on a free port.
Used by test_live_vllm.py and bench/bench_live.py."""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def poll(read, check, timeout_s: float, what: str, every_s: float = 0.1):
    """read() until check(what it read) holds; a read that raises (the page being redrawn) is
    read again. AssertionError naming `what` and the last reading when time runs out."""
    end, seen = time.monotonic() + timeout_s, None
    while time.monotonic() < end:
        try:
            seen = read()
            if check(seen):
                return seen
        except Exception as e:   # noqa: BLE001 - the page is being redrawn
            seen = repr(e)[:300]
        time.sleep(every_s)
    raise AssertionError(f"{what}; last reading {seen}")


# ui.primer's empty chart, the one static chart: app.py takes it away when a session's first run ends
PRIMER_GONE = "![...document.querySelectorAll('.js-plotly-plot')].some(gd => gd._context && gd._context.staticPlot)"


def settled(page, timeout: float) -> None:
    """Wait (timeout in ms) until the page's run has ended: no status widget, and on a session's first
    run the primer chart gone too (a loaded machine can show no status widget for a moment while
    the run goes on, and a test that counts charts would count the primer)."""
    from playwright.sync_api import expect
    expect(page.get_by_test_id("stStatusWidget")).to_have_count(0, timeout=timeout)
    page.wait_for_function(PRIMER_GONE, timeout=timeout)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
            return r.read().strip() == b"ok"
    except OSError:
        return False


@contextlib.contextmanager
def dashboard(env: dict, log_path: Path, timeout_s: float = 90.0):
    """The URL of a dashboard started with `env` added to this process's environment."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "serve.py", "--server.headless", "true", "--server.port", str(port),
             "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
             "--server.fileWatcherType", "none"],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            env={**os.environ, "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false", "PYTHONUNBUFFERED": "1", **env})
    try:
        end = time.monotonic() + timeout_s
        while not healthy(url):
            if proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError(f"the dashboard did not start: {Path(log_path).read_text(errors='replace')[-3000:]}")
            time.sleep(0.2)
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)   # only the process group started here
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)


class FileSteps:
    """When each step line first became readable in a recording (polled every `every_s`):
    the moment the recorder's flush made it visible, to time the page against."""

    def __init__(self, path: Path, every_s: float = 0.01):
        self.path, self.every_s = Path(path), every_s
        self.seen: dict[int, float] = {}   # step -> time.monotonic() it was first in the file
        self.count_at: list[tuple[float, int]] = []   # (time, steps in the file) at each change
        self._stop = False

    def run(self) -> None:
        import json
        offset, buf, n = 0, b"", 0
        while not self._stop:
            try:
                with open(self.path, "rb") as f:
                    f.seek(offset)
                    data = f.read()
            except OSError:
                data = b""
            now = time.monotonic()
            if data:
                offset += len(data)
                buf += data
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    if b'"kind":"step"' in line[:20]:
                        try:
                            k = json.loads(line).get("step")
                        except ValueError:
                            continue
                        if k is not None:
                            n += 1
                            self.seen.setdefault(n, now)   # the n-th step line (what the page counts)
                self.count_at.append((now, n))
            time.sleep(self.every_s)

    def stop(self) -> None:
        self._stop = True


def delays(file_steps: FileSteps, page_counts: list[tuple[float, int]]) -> list[float]:
    """For each step count the page showed for the first time, seconds since that step's line
    was in the file (the newest step shown is what a visitor waits for)."""
    out, shown = [], 0
    for t, n in page_counts:
        if n > shown:
            if n in file_steps.seen:
                out.append(t - file_steps.seen[n])
            shown = n
    return out
