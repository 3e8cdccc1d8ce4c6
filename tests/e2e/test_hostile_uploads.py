"""Hostile uploads in a real browser (Chromium): a nesting bomb and a NaN arrival time on
Playback each give one plain message; the page shows no traceback and no server path, and the
server's own log stays free of them too (nothing escaped to Streamlit's handler)."""
from __future__ import annotations

import json
import math

from playwright.sync_api import expect

import conftest

CHARTS = "document.querySelectorAll('.js-plotly-plot').length >= 3"
LEAKS = ("Traceback", ".py", "/work/", 'File "')


def _upload(page, name: str, data: bytes) -> None:
    page.locator(".st-key-pb_upload input[type=file]").set_input_files(
        files=[{"name": name, "mimeType": "application/json", "buffer": data}])


def _assert_no_leak(page) -> None:
    expect(page.get_by_test_id("stException")).to_have_count(0)
    text = page.locator("body").inner_text()
    assert not [leak for leak in LEAKS if leak in text], text[-2000:]


def _log_text() -> str:
    return conftest._server_log.read_text(errors="replace") if conftest._server_log else ""


def test_hostile_workloads_on_playback_get_a_plain_line(page, app_url):
    log_start = len(_log_text())   # the server is shared by the session: read only what this test adds
    page.goto(app_url)
    page.wait_for_function(CHARTS, timeout=60_000)
    page.get_by_text("Upload a workload JSON").click()
    expect(page.get_by_text("Upload a workload JSON on the left")).to_be_visible(timeout=30_000)

    _upload(page, "nested.json", b"[" * 100_000 + b"]" * 100_000)
    error = page.get_by_test_id("stAlertContentError")
    expect(error).to_contain_text("100,000 levels deep", timeout=30_000)
    expect(error).to_contain_text("at most 64 levels")
    _assert_no_leak(page)

    nan = json.dumps({"requests": [{"id": "r7", "prompt_len": 4, "max_tokens": 2, "arrival_time": math.nan}]})
    _upload(page, "nan.json", nan.encode())
    expect(error).to_contain_text("arrival_time of request r7 is NaN; arrival times must be finite numbers",
                                  timeout=30_000)
    _assert_no_leak(page)

    # the server's log holds no traceback either: both were refused, not crashed on
    log = _log_text()[log_start:]
    assert "Traceback" not in log and "RecursionError" not in log, log[-3000:]
