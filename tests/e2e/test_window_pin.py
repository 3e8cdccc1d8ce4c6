"""WindowPicker's "Last N" pin in a real browser on a run that keeps growing (ui/window.py): a
one-page app (window_pin_app.py) reruns the picker every second on a recording cut to more steps
each time, as a page following a recording does. After "Last 5,000" is pressed, the window ends on
the run's latest step at every rerun and the setting keeps `last5000` (it once froze on the steps
of the press, 1-N, in Chromium only: AppTest did not show it)."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from playwright.sync_api import Page, expect

from live_app import free_port, healthy, poll

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
WINDOW = re.compile(r"Window: steps ([\d,]+) to ([\d,]+) \(([\d,]+) of ([\d,]+)\)")


def window_caption(page: Page) -> tuple[int, int, int]:
    """(first, last, steps in the run) as the caption under the overview says."""
    text = page.get_by_text("Window: steps", exact=False).first.text_content(timeout=5_000) or ""
    m = WINDOW.search(text)
    assert m, text
    a, b, _, n = (int(g.replace(",", "")) for g in m.groups())
    return a, b, n


def wait_window(page: Page, check, timeout_s: float = 20) -> tuple[int, int, int]:
    return poll(lambda: window_caption(page), check, timeout_s, "the window did not move as expected")


def start_app(log_path: Path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(log_path, "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(HERE / "window_pin_app.py"), "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
         "--server.fileWatcherType", "none"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    end = time.monotonic() + 60
    while not healthy(url):
        if proc.poll() is not None or time.monotonic() > end:
            raise RuntimeError(f"the app did not start: {log_path.read_text(errors='replace')[-3000:]}")
        time.sleep(0.2)
    return proc, url, log


def test_last_n_stays_on_the_latest_step_as_the_run_grows(page: Page, tmp_path):
    proc, url, log = start_app(tmp_path / "app.log")
    try:
        page.goto(url + "/?win=last300")
        expect(page.get_by_test_id("stException")).to_have_count(0, timeout=30_000)
        ends = []
        for _ in range(8):   # eight reruns that each grew the run
            first, last, n = wait_window(page, lambda w: w[2] > (ends[-1] if ends else 100) and w[1] == w[2])
            assert first == max(1, n - 299) and last == n, (first, last, n)
            ends.append(n)
        assert ends == sorted(set(ends)), ends
        expect(page.get_by_test_id("stException")).to_have_count(0)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)   # only the process group started here
        proc.wait(10)
        log.close()
