"""vLLM server page in a real browser: a bundled recording is drawn, a recording uploaded through
the file input replaces it, and the simulator's verdict appears one toggle away."""
from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page, expect

from servers.vllm.compare import decisions
from servers.vllm.recording import read_recording, to_trace
from live_app import settled  # tests/e2e is on sys.path

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "vllm"


def wait_ready(page: Page, charts: int) -> None:
    page.wait_for_function(f"document.querySelectorAll('.js-plotly-plot').length >= {charts}", timeout=90_000)
    settled(page, timeout=90_000)
    expect(page.get_by_test_id("stException")).to_have_count(0)
    expect(page.get_by_test_id("stAlertContentError")).to_have_count(0)


def test_a_recording_is_drawn_and_the_simulator_makes_its_decisions(page: Page, app_url):
    page.goto(f"{app_url}/vllm_server")
    wait_ready(page, 4)   # lanes, tokens per step, phases, the block map
    expect(page.get_by_role("heading", name="vLLM server")).to_be_visible()
    lanes = page.locator(".st-key-vs_lanes .js-plotly-plot")
    assert lanes.locator("g.trace").count() > 0

    up = SAMPLES / "priority.jsonl.gz"
    rec = read_recording(up)
    steps, decided = len(to_trace(rec).steps), decisions(rec)["steps"]
    page.locator(".st-key-vs_upload input[type=file]").set_input_files(str(up))
    expect(page.get_by_text("Showing the uploaded recording")).to_be_visible(timeout=60_000)
    wait_ready(page, 4)
    metric = page.get_by_test_id("stMetric").filter(has_text="Steps").first
    expect(metric).to_contain_text(f"{steps:,}")

    page.get_by_text("Hold the simulator to this recording").click()
    expect(page.get_by_text(f"The same decisions at all {decided:,} steps", exact=False)).to_be_visible(
        timeout=90_000)
    wait_ready(page, 5)   # and the prediction's chart
    expect(page.locator(".st-key-vs_prediction .js-plotly-plot")).to_have_count(1)
