"""The Fleet page in a real browser (Chromium): it loads with every replica's lanes on one time
axis, the one scrubber moves the marker on the lanes and the signals, and a 16-replica,
20,000-request fleet renders and scrubs (its first render and scrub times are printed).

How the times are measured: from the browser's side, with time.monotonic around Playwright
waits. First render: from giving the uploaded workload to the page until the lanes chart holds
16 replicas and Streamlit's "running" widget is gone (reading the upload, simulating the fleet,
the numbers, building and drawing every chart). Scrub: from one ArrowRight on the time slider
until the lanes' and the signals' markers both sit at the new time and the page is idle
(the fragment's rerun on the server, the transfer, Plotly's redraw).
"""
from __future__ import annotations

import dataclasses
import re
import statistics
import time

import numpy as np
from playwright.sync_api import Page, expect
from live_app import settled  # tests/e2e is on sys.path

LANES = ".st-key-fleet_lanes .js-plotly-plot"
SIGNALS = ".st-key-fleet_signals .js-plotly-plot"
SLIDER = ".st-key-keep_fleet_t input[type=range]"
BIG = {"replicas": 16, "requests": 20_000}


def wait_ready(page: Page, charts: int, timeout: int = 90_000) -> None:
    page.wait_for_function(f"document.querySelectorAll('.js-plotly-plot').length >= {charts}", timeout=timeout)
    settled(page, timeout=timeout)
    expect(page.get_by_test_id("stException")).to_have_count(0)
    expect(page.get_by_test_id("stAlertContentError")).to_have_count(0)


def marker(page: Page, chart: str) -> float:
    return page.evaluate(f"() => document.querySelector('{chart}').layout.shapes[0].x0")


def lanes_meta(page: Page) -> dict:
    return page.evaluate(f"""() => {{
        const gd = document.querySelector('{LANES}');
        const heat = gd.data.filter(t => t.type === 'heatmap' && !t.name.endsWith(' kind'));
        return {{meta: gd.layout.meta, rows: heat.map(t => t.yaxis), xs: [...new Set(heat.map(t => t.xaxis))]}};
    }}""")


def scrub_once(page: Page) -> tuple[float, float, float]:
    """One ArrowRight on the time slider: (old time, new time, seconds until both markers moved
    and the page is idle)."""
    before = marker(page, LANES)
    t0 = time.monotonic()
    page.locator(SLIDER).focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_function(f"""() => {{
        const a = document.querySelector('{LANES}'), b = document.querySelector('{SIGNALS}');
        return a && b && a.layout.shapes[0].x0 !== {before} && b.layout.shapes[0].x0 === a.layout.shapes[0].x0;
    }}""", timeout=60_000)
    settled(page, timeout=60_000)
    return before, marker(page, LANES), time.monotonic() - t0


def test_the_fleet_page_loads_with_its_lanes_and_the_scrubber_moves_the_marker(page: Page, app_url: str):
    t0 = time.monotonic()
    page.goto(f"{app_url}/fleet")
    wait_ready(page, 6)
    print(f"\nfleet (chat scenario, 4 replicas, A/B) first render: {time.monotonic() - t0:.1f} s")
    expect(page.get_by_role("heading", name="Fleet", exact=True)).to_be_visible()
    info = lanes_meta(page)
    assert info["meta"]["replicas"] == 4 and info["rows"] == ["y", "y2", "y3", "y4"] and info["xs"] == ["x"]
    t = int(page.locator(".st-key-keep_fleet_t [data-testid=stSliderThumbValue]").inner_text().replace(",", ""))
    assert marker(page, LANES) == marker(page, SIGNALS) == t
    old, new, secs = scrub_once(page)
    assert new > old and marker(page, SIGNALS) == new
    print(f"fleet (chat) scrub: {secs:.2f} s")
    expect(page.get_by_text(f"The fleet at {int(new):,} ms")).to_be_visible(timeout=20_000)
    expect(page).to_have_url(re.compile(rf"fleet_t={int(new)}\b"), timeout=20_000)
    page.locator(".st-key-fleet_t_prev button:visible").first.click()
    page.wait_for_function(f"() => document.querySelector('{LANES}').layout.shapes[0].x0 === {old}", timeout=30_000)
    # the routing table downloads as CSV, one row per request
    with page.expect_download(timeout=60_000) as info:
        page.locator(".st-key-fleet_a_dl_routes button:visible").first.click()
    dl = info.value
    assert dl.suggested_filename == "chat.A.routes.csv"
    lines = open(dl.path(), encoding="utf-8").read().splitlines()
    assert lines[0].startswith("request,tenant,prompt_len,arrival,replica,reason") and len(lines) == 601


def big_workload() -> bytes:
    """20,000 chat requests (24 shared system prompts) at 80 a second, 4-16 output tokens each."""
    from sim.fleet.scenarios import chat

    wl = chat(n=BIG["requests"], rate_per_s=80.0)
    rng = np.random.default_rng(5)
    wl.requests = [dataclasses.replace(r, max_tokens=int(rng.integers(4, 17))) for r in wl.requests]
    return wl.dumps().encode()


def test_a_16_replica_20k_request_fleet_renders_and_scrubs(page: Page, app_url: str):
    data = big_workload()
    page.goto(f"{app_url}/fleet?fleet_source=Upload%20a%20workload%20JSON&fleet_ab=false"
              f"&fleet_a_replicas={BIG['replicas']}&fleet_a_router=least_loaded")
    uploader = page.locator(".st-key-fleet_upload input[type=file]")
    uploader.wait_for(state="attached", timeout=60_000)
    t0 = time.monotonic()
    uploader.set_input_files(files=[{"name": "chat20k.json", "mimeType": "application/json", "buffer": data}])
    page.wait_for_function(f"() => {{ const g = document.querySelector('{LANES}'); "
                           f"return g && g.layout && g.layout.meta && g.layout.meta.replicas === {BIG['replicas']}; }}",
                           timeout=240_000)
    wait_ready(page, 3, timeout=240_000)
    first = time.monotonic() - t0
    caption = page.get_by_text(re.compile(r"^Fleet A: 20,000 requests on 16 replicas \(sync scheduling\), "
                                          r"simulated in")).inner_text()
    sim_s = float(re.search(r"simulated in ([\d.,]+) s", caption).group(1).replace(",", ""))
    info = lanes_meta(page)
    assert len(info["rows"]) == 16 and info["meta"]["bins"] <= 1200
    expect(page.get_by_test_id("stDataFrame").first).to_be_visible()   # the tables (the routing table among them)
    times = [scrub_once(page)[2] for _ in range(3)]
    print(f"\nfleet 16 replicas x 20,000 requests (least_loaded, A/B off): first render {first:.1f} s "
          f"(of which simulating {sim_s:.1f} s on the server), lanes {info['meta']['cells']:,} cells; "
          f"scrub {', '.join(f'{s:.2f}' for s in times)} s (median {statistics.median(times):.2f} s)")
    assert statistics.median(times) < 15   # a scrub redraws in seconds, not a run's time
