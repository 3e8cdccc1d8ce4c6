"""Playback page in a real browser: it renders, and Plotly's Play advances the step."""
from __future__ import annotations

import re
import time

from playwright.sync_api import expect
from live_app import settled  # tests/e2e is on sys.path

CHARTS = "document.querySelectorAll('.js-plotly-plot').length >= 3"


def _label_step(plot) -> int:
    text = plot.locator("text.slider-label").first.text_content() or ""
    m = re.search(r"step (\d+)", text)
    assert m, f"no step in slider label {text!r}"
    return int(m.group(1))


def test_playback_renders_and_play_advances(page, app_url):
    t0 = time.monotonic()
    page.goto(app_url)
    page.wait_for_function(CHARTS, timeout=60_000)
    settled(page, timeout=60_000)
    print(f"\nplayback first render: {time.monotonic() - t0:.1f} s")
    expect(page.get_by_test_id("stException")).to_have_count(0)
    expect(page.get_by_test_id("stAlertContentError")).to_have_count(0)  # no st.error box either
    expect(page.get_by_role("heading", name="Playback")).to_be_visible()

    plot = page.locator(".js-plotly-plot").first  # the slot-lane animation
    last = _label_step(plot)
    assert last == 7  # the default scenario (lesson A/B/C) runs 7 steps; the chart opens fully shown
    curtain_x0 = "() => document.querySelector('.js-plotly-plot').layout.shapes[0].x0"
    assert page.evaluate(curtain_x0) == last + 0.5

    plot.locator(".updatemenu-button").filter(has_text="Play").click()
    seen: list[int] = []
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        seen.append(_label_step(plot))
        if len(set(seen)) >= 3 and seen[-1] > min(seen):
            break
        time.sleep(0.1)
    # Play restarts from step 1 and then the step advances
    assert min(seen) < last, seen
    firsts = [s for i, s in enumerate(seen) if i == 0 or s != seen[i - 1]]
    assert len(firsts) >= 3 and firsts[-1] > firsts[1], firsts
    # the curtain (a layout shape carried by the frames) moved with it
    assert page.evaluate(curtain_x0) < last + 0.5 or _label_step(plot) == last
