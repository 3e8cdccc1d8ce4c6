"""Server log page in a real browser: the default sample draws its charts; upload a real vLLM
excerpt through the file input and see its stats lines and gauges."""
from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page, expect
from live_app import settled  # tests/e2e is on sys.path

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "engine_logs"


def wait_ready(page: Page, charts: int) -> None:
    page.wait_for_function(f"document.querySelectorAll('.js-plotly-plot').length >= {charts}", timeout=90_000)
    settled(page, timeout=90_000)
    expect(page.get_by_test_id("stException")).to_have_count(0)
    expect(page.get_by_test_id("stAlertContentError")).to_have_count(0)


def test_sample_then_upload_a_vllm_log(page: Page, app_url):
    page.goto(f"{app_url}/server_log")
    wait_ready(page, 2)
    expect(page.get_by_role("heading", name="Server log")).to_be_visible()
    meta = page.evaluate("() => document.querySelector('.st-key-sl_batches .js-plotly-plot').layout.meta")
    assert meta["batches"] == 7 and meta["unknown_spans"] >= 1
    # the unknown spans are drawn as shapes, not as idle bars
    assert page.evaluate("() => document.querySelector('.st-key-sl_batches .js-plotly-plot').layout.shapes.length") > 0

    page.locator(".st-key-sl_upload input[type=file]").set_input_files(str(FIX / "vllm" / "20_vllm-ascend_11876.log"))
    expect(page.get_by_text("V1 with `Engine 00N:` labels", exact=False).first).to_be_visible(timeout=60_000)
    wait_ready(page, 1)
    expect(page.locator(".st-key-sl_batches .js-plotly-plot")).to_have_count(0)   # vLLM: no per-step batches
    g = page.evaluate("() => document.querySelector('.st-key-sl_gauges .js-plotly-plot').layout.meta")
    assert g["lanes"] == ["Engine 001"] and "kv_usage" in g["gauges"]
    assert page.locator(".st-key-sl_gauges g.trace.scatter").count() >= 3
