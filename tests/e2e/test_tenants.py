"""Tenants and fairness in a real browser: it renders the lesson's run, and Play replays all four runs."""
from __future__ import annotations

import re
import time

from playwright.sync_api import expect
from live_app import settled  # tests/e2e is on sys.path


def _label(plot, prefix: str) -> int:
    text = plot.locator("text.slider-label").first.text_content() or ""
    m = re.search(prefix + r" ([\d,]+)", text)
    assert m, f"no {prefix!r} in slider label {text!r}"
    return int(m.group(1).replace(",", ""))


def play_and_watch(plot, prefix: str, seconds: float = 20, until=lambda seen: len(set(seen)) >= 4) -> list[int]:
    """Press ▶ Play and read the slider label until `until(seen)` (default: it took 4 values)."""
    plot.locator(".updatemenu-button").filter(has_text="Play").click()
    seen: list[int] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        seen.append(_label(plot, prefix))
        if until(seen):
            break
        time.sleep(0.1)
    return seen


def open_page(page, url: str, title: str, charts: int) -> None:
    """Go to `url`, wait for `charts` Plotly charts and the end of the script run, check for no
    exception box and the page's heading."""
    page.goto(url)
    page.wait_for_function(f"document.querySelectorAll('.js-plotly-plot').length >= {charts}", timeout=90_000)
    settled(page, timeout=90_000)
    expect(page.get_by_test_id("stException")).to_have_count(0)
    expect(page.get_by_test_id("stAlertContentError")).to_have_count(0)  # no st.error box either
    expect(page.get_by_role("heading", name=title)).to_be_visible()


def test_tenants_renders_and_play_replays(page, app_url):
    open_page(page, f"{app_url}/tenants", "Tenants and fairness", 3)
    expect(page.get_by_text("B0@11 B1@20").first).to_be_visible()  # the lesson's capped run

    plot = page.locator(".js-plotly-plot").first  # the four timelines
    assert _label(plot, "step") == 41  # opens fully shown: the last request finishes in step 41
    seen = play_and_watch(plot, "step")
    firsts = [s for i, s in enumerate(seen) if i == 0 or s != seen[i - 1]]
    assert min(seen) < 41 and len(firsts) >= 3 and firsts[-1] > firsts[1], firsts
    # the veils (4 panels x veil + cursor) moved with the frames
    x0 = page.evaluate("() => document.querySelector('.js-plotly-plot').layout.shapes[0].x0")
    assert x0 < 41 + 9
