"""The concept pages "Why batch", "Static vs continuous batching" and "Prefill interference and
chunked prefill" in a real browser: each renders without an error box, and Plotly's ▶ Play
advances its animation (the slider label's number changes and moves on)."""
from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect
from live_app import settled  # tests/e2e is on sys.path


def _label(plot) -> int:
    text = plot.locator("text.slider-label").first.text_content() or ""
    m = re.search(r"(\d+)\s*$", text)
    assert m, f"no number in slider label {text!r}"
    return int(m.group(1))


@pytest.mark.parametrize("path, heading, charts, prefix", [
    ("why_batch", "Why batch", 1, "batch"),
    ("batching", "Static vs continuous batching", 2, "step"),
    ("chunked_prefill", "Prefill interference and chunked prefill", 2, "step"),
])
def test_page_renders_and_play_advances(page, app_url, path, heading, charts, prefix):
    t0 = time.monotonic()
    page.goto(f"{app_url}/{path}")
    page.wait_for_function(f"document.querySelectorAll('.js-plotly-plot').length >= {charts}", timeout=90_000)
    settled(page, timeout=90_000)
    print(f"\n{path} first render: {time.monotonic() - t0:.1f} s")
    expect(page.get_by_test_id("stException")).to_have_count(0)
    expect(page.get_by_test_id("stAlertContentError")).to_have_count(0)  # no st.error box either
    expect(page.get_by_text("Page not found")).to_have_count(0)
    expect(page.get_by_role("heading", name=heading)).to_be_visible()

    plot = page.locator(".js-plotly-plot").filter(has=page.locator(".updatemenu-button")).first
    assert (plot.locator("text.slider-label").first.text_content() or "").startswith(prefix)
    start = _label(plot)
    plot.locator(".updatemenu-button").filter(has_text="Play").click()
    seen: list[int] = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        seen.append(_label(plot))
        if len(set(seen) - {start}) >= 2:
            break
        time.sleep(0.1)
    changes = [s for i, s in enumerate(seen) if i == 0 or s != seen[i - 1]]
    assert len(set(seen) - {start}) >= 2, seen  # the label moved through at least two new values
    assert any(b > a for a, b in zip(changes, changes[1:])), changes  # and moved forward
