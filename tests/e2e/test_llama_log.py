"""llama-server log page in a real browser: upload a real log through the file input and see its batches."""
from __future__ import annotations

import re
import time
from pathlib import Path

from playwright.sync_api import Page, expect

from servers.llama_server import read_llama_log
from live_app import settled  # tests/e2e is on sys.path

LOG = Path(__file__).resolve().parents[1] / "fixtures" / "llama-logs" / "c392e5094" / "s6_stream_cancel_seed603.log"
BATCHES = ".st-key-ll_batches .js-plotly-plot"


def wait_ready(page: Page, charts: int = 3) -> None:
    """The page has drawn `charts` charts (the log's batches, its slot lanes, the call inspector;
    one more with the re-simulation on) and finished running."""
    page.wait_for_function(f"document.querySelectorAll('.js-plotly-plot').length >= {charts}", timeout=90_000)
    settled(page, timeout=90_000)
    expect(page.get_by_test_id("stException")).to_have_count(0)
    expect(page.get_by_test_id("stAlertContentError")).to_have_count(0)  # no st.error box either


def test_upload_a_real_log_and_see_its_batches(page: Page, app_url):
    t0 = time.monotonic()
    page.goto(f"{app_url}/llama_log")
    wait_ready(page)
    print(f"\nllama-log first render: {time.monotonic() - t0:.1f} s")
    expect(page.get_by_role("heading", name="llama-server log")).to_be_visible()
    expect(page.get_by_text("1,500 model calls")).to_be_visible()  # the default sample (s1)

    n = len(read_llama_log(LOG).steps)
    t1 = time.monotonic()
    page.locator(".st-key-ll_upload input[type=file]").set_input_files(str(LOG))
    expect(page.get_by_text(f"{n:,} model calls", exact=False)).to_be_visible(timeout=60_000)
    wait_ready(page)
    print(f"upload + parse + render: {time.monotonic() - t1:.1f} s")
    expect(page.get_by_text(re.compile(r"4748 \(c392e5094\)"))).to_be_visible()

    # the batch chart holds the uploaded log's calls: bars up to its last call, one legend entry per slot
    bars = page.locator(BATCHES)
    expect(bars).to_have_count(1)
    meta = page.evaluate(f"() => document.querySelector('{BATCHES}').layout.meta")
    assert meta["calls"] == n and meta["window"][1] == n
    assert page.locator(BATCHES).locator("g.trace.bars path").count() > 100
    legend = page.locator(BATCHES).locator("g.legend text.legendtext").all_text_contents()
    assert {"slot 0", "slot 1", "prompt chunk (hatched)"} <= set(legend)
    expect(page.get_by_test_id("stException")).to_have_count(0)
    expect(page.get_by_test_id("stAlertContentError")).to_have_count(0)  # no st.error box either

    # one click re-simulates the uploaded log's workload beside it
    page.get_by_text("Re-simulate this workload").click()
    wait_ready(page, 4)
    expect(page.locator(".st-key-ll_cmp_batches .js-plotly-plot")).to_have_count(1)
    expect(page.get_by_text("Simulated llama-server: model calls")).to_be_visible()
    expect(page.get_by_test_id("stException")).to_have_count(0)
    expect(page.get_by_test_id("stAlertContentError")).to_have_count(0)  # no st.error box either


def test_logs_as_collected_in_the_browser(page: Page, app_url, tmp_path):
    """A `docker logs -t --since` excerpt (tests/collected.py) and a 2024 build's --log-format json
    log (tests/fixtures/llama-logs-2024), each uploaded through the file input: their calls, what
    the page says of the prefix, the clock and the partial tasks, and of the 2024 format."""
    from collected import docker_excerpt
    docker = tmp_path / "llama-server.docker.log"
    docker.write_bytes(docker_excerpt())
    trace = read_llama_log(docker)
    page.goto(f"{app_url}/llama_log")
    wait_ready(page)
    page.locator(".st-key-ll_upload input[type=file]").set_input_files(str(docker))
    expect(page.get_by_text(f"{len(trace.steps):,} model calls", exact=False)).to_be_visible(timeout=60_000)
    wait_ready(page)
    expect(page.get_by_text(re.compile(r"Lines carry a prefix.*docker"))).to_be_visible()
    n_partial = int(trace.requests["partial"].sum())
    body = page.locator("body").inner_text()
    assert f"{n_partial} task(s) began before the log" in body, body[:3000]

    old = Path(__file__).resolve().parents[1] / "fixtures" / "llama-logs-2024" / "s4_small_ctx_context_shift_default_on.json.log.gz"
    n_old = len(read_llama_log(old).steps)
    page.locator(".st-key-ll_upload input[type=file]").set_input_files(str(old))
    expect(page.get_by_text(f"{n_old:,} model calls", exact=False)).to_be_visible(timeout=90_000)
    wait_ready(page)
    expect(page.get_by_text(re.compile(r"^Read as ")).first).to_be_visible()
    body = page.locator("body").inner_text()
    assert "Traceback" not in body and "/work/" not in body
