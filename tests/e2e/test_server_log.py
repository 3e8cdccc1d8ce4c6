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


def test_upload_the_new_engines_logs(page: Page, app_url, tmp_path):
    """A TensorRT-LLM log (a step per iteration line) and a TGI log (a request per Success line)
    uploaded through the file input: each draws its chart in Chromium, no error."""
    from tgi_lines import success
    from trtllm_lines import iteration_log
    trt = tmp_path / "trtllm-serve.log"
    trt.write_text(iteration_log(200), encoding="utf-8")
    tgi = tmp_path / "tgi.log"
    tgi.write_text("\n".join(success(0.5 + i * 0.2, total=200.0 + 30 * (i % 9), validation=1.0, queue=4.0 * (i % 6),
                                     tokens=6 + i % 11) for i in range(80)) + "\n", encoding="utf-8")
    page.goto(f"{app_url}/server_log?sl_resim=false")
    wait_ready(page, 2)
    page.locator(".st-key-sl_upload input[type=file]").set_input_files(str(trt))
    expect(page.get_by_role("heading", name="Logged iterations")).to_be_visible(timeout=60_000)
    wait_ready(page, 2)
    meta = page.evaluate("() => document.querySelector('.st-key-sl_batches .js-plotly-plot').layout.meta")
    assert meta["steps"] == 200
    page.locator(".st-key-sl_upload input[type=file]").set_input_files(str(tgi))
    expect(page.get_by_role("heading", name="Logged requests")).to_be_visible(timeout=60_000)
    wait_ready(page, 2)
    meta = page.evaluate("() => document.querySelector('.st-key-sl_batches .js-plotly-plot').layout.meta")
    assert meta["requests"] == 80 and meta["panels"] == ["queue time", "inference time"]
    g = page.evaluate("() => document.querySelector('.st-key-sl_gauges .js-plotly-plot').layout.meta")
    assert {"running", "waiting"} <= set(g["gauges"])
