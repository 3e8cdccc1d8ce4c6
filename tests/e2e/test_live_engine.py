"""Live engine page in a real browser: Start runs the engine, the live fragment refreshes on its
own (run_every) and the step counter advances; Stop shows the run's views and the simulator."""
from __future__ import annotations

import os
import time

from playwright.sync_api import TimeoutError as PlaywrightTimeout, expect

SHOT = os.environ.get("LIVE_ENGINE_SCREENSHOT")  # a path: save what the page looks like after the run


def _step(page) -> int:
    """The live panel's first metric: the engine's step counter."""
    v = page.get_by_test_id("stMetricValue").first.text_content() or "0"
    return int(v.replace(",", ""))


def _badge(page, text: str):
    """The engine's state badge (the live chart's legend also says "running")."""
    return page.locator("span.stMarkdownBadge").get_by_text(text, exact=True)


def test_live_engine_steps_advance_in_the_browser(page, app_url):
    t0 = time.monotonic()
    # the Poisson stream's arrivals span seconds, so the run outlasts the polling below on any machine
    page.goto(f"{app_url}/live_engine?le_preset=poisson&le_blocks=40")
    start = page.get_by_role("button", name="Start")
    expect(start).to_be_enabled(timeout=90_000)  # the first visit imports torch in the server
    expect(page.get_by_test_id("stException")).to_have_count(0)
    expect(page.get_by_test_id("stAlertContentError")).to_have_count(0)  # no st.error box either
    start.click()
    expect(_badge(page, "running")).to_be_visible(timeout=60_000)
    print(f"\nlive engine: page + start {time.monotonic() - t0:.1f} s")

    # no clicks from here on: only the fragment's own timer can move the counter
    seen: list[int] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        seen.append(_step(page))
        if len(set(v for v in seen if v > 0)) >= 3:
            break
        time.sleep(0.25)
    distinct = list(dict.fromkeys(v for v in seen if v > 0))
    assert len(distinct) >= 3 and distinct == sorted(distinct), seen
    print(f"live engine: counter advanced {distinct[:6]} after {time.monotonic() - t0:.1f} s")

    # the page's own Stop: while a fragment rerun is in flight Streamlit's header shows a "Stop" too
    stop = page.get_by_test_id("stMainBlockContainer").get_by_role("button", name="Stop", exact=True)
    if stop.is_enabled():  # else the run already finished and the page stopped the engine itself
        try:
            stop.click(timeout=5_000)
        except PlaywrightTimeout:
            pass
    expect(page.get_by_role("heading", name="Compare with the simulator")).to_be_visible(timeout=90_000)
    expect(_badge(page, "stopped")).to_be_visible()
    expect(page.get_by_test_id("stException")).to_have_count(0)
    expect(page.get_by_test_id("stAlertContentError")).to_have_count(0)  # no st.error box either
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 6", timeout=60_000)
    print(f"live engine: stopped, run views shown after {time.monotonic() - t0:.1f} s")
    if SHOT:
        page.screenshot(path=SHOT)
