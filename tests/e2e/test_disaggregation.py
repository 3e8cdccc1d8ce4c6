"""Disaggregation in a real browser: it renders the lesson's numbers, and Play grows the prompt."""
from __future__ import annotations

from playwright.sync_api import expect

from test_tenants import _label, open_page, play_and_watch


def test_disaggregation_renders_and_play_grows_the_prompt(page, app_url):
    open_page(page, f"{app_url}/disaggregation", "Disaggregation", 4)
    # lesson Example 10: over 100 Gb/s Ethernet the transfer is 32.3% of the prefill
    expect(page.get_by_test_id("stMetricValue").filter(has_text="32.3%")).to_be_visible()

    plot = page.locator(".js-plotly-plot").last  # the animated time to first token
    assert _label(plot, "prompt") == 1024  # opens on the lesson's first prompt
    seen = play_and_watch(plot, "prompt", until=lambda seen: max(seen) > 2048)  # from the shortest prompt up
    firsts = [s for i, s in enumerate(seen) if i == 0 or s != seen[i - 1]]
    assert len(firsts) >= 3 and firsts == sorted(firsts) and max(seen) > 1024, seen
    # the bars changed with the frames: the transfer over NVLink is no longer the 1,024-token one
    x = page.evaluate("() => [...document.querySelectorAll('.js-plotly-plot')].pop()._fullData[1].x[0]")
    assert x > 0.30
