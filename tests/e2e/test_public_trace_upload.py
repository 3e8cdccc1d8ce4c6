"""A public request trace uploaded on Playback in a real browser (Chromium): a BurstGPT CSV
named .txt is taken (the content says what it is), read, and run on the ms roofline; a file
that is no trace gets one short line naming what was expected, and the formats under it."""
from __future__ import annotations

from pathlib import Path

from playwright.sync_api import expect

CHARTS = "document.querySelectorAll('.js-plotly-plot').length >= 3"
FIX = Path(__file__).resolve().parents[1] / "fixtures" / "public_traces"


def _upload(page, name: str, data: bytes) -> None:
    page.locator(".st-key-pb_upload input[type=file]").set_input_files(
        files=[{"name": name, "mimeType": "text/plain", "buffer": data}])


def test_a_burstgpt_trace_named_txt_runs_on_playback(page, app_url):
    page.goto(app_url)
    page.wait_for_function(CHARTS, timeout=60_000)
    page.get_by_text("Upload a workload JSON").click()
    expect(page.get_by_text("Upload a workload JSON on the left")).to_be_visible(timeout=30_000)

    _upload(page, "burstgpt_trace.txt", (FIX / "burstgpt.csv").read_bytes())
    expect(page.get_by_text("BurstGPT trace: 77 requests of 80 rows")).to_be_visible(timeout=60_000)
    page.wait_for_function(CHARTS, timeout=60_000)
    expect(page.get_by_test_id("stException")).to_have_count(0)
    expect(page.get_by_test_id("stAlertContentError")).to_have_count(0)
    expect(page.get_by_text("the step cost was set to a100-8B-fp16")).to_be_visible()

    _upload(page, "numbers.csv", b"when,in,out\n1,2,3\n")
    error = page.get_by_test_id("stAlertContentError")
    expect(error).to_contain_text("none of the formats read here", timeout=30_000)
    expect(error.locator("p")).to_have_count(1)   # one short line (the alert's icon aside)
    line = error.locator("p").inner_text().strip()
    assert len(line) <= 200 and "\n" not in line, line
    # what each format looks like is under the message, not in it
    expect(error).not_to_contain_text("TIMESTAMP,ContextTokens,GeneratedTokens")
    expect(page.get_by_text("Accepted formats")).to_be_visible()
    expect(page.get_by_text("TIMESTAMP,ContextTokens,GeneratedTokens").first).to_be_visible()
    expect(page.get_by_test_id("stException")).to_have_count(0)
