"""Policies, Admission and KV memory pages in a real browser: each renders without an error box,
and Plotly's ▶ Play advances the animation's step."""
from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect
from live_app import settled  # tests/e2e is on sys.path

# (url path with settings, page heading, charts expected, index of the animated chart to play, step it opens on)
PAGES = [
    ("policies", "Policies and starvation", 2, 0, 80),
    ("admission?adm_ticks=4000", "Admission and Little's law", 1, 0, 4000),
    ("kv_memory", "KV memory and preemption", 3, 0, 22),
]


def _label_step(plot) -> int:
    """The step on show: the slider's "step N", or, where the slider is bare (Admission), the
    "tick N" of the chart's own live box."""
    labels = plot.locator("text.slider-label")
    text = labels.first.text_content() if labels.count() else ""
    m = re.search(r"step (\d+)", text or "")
    if m is None:
        live = plot.locator("g.textpoint text").first.text_content() or ""
        m = re.search(r"tick ([\d,]+)", live)
        assert m, f"no step in the slider label {text!r} nor in the live box {live[:80]!r}"
    return int(m.group(1).replace(",", ""))


@pytest.mark.parametrize("path,heading,charts,animated,opens_at", PAGES, ids=[p[0].split("?")[0] for p in PAGES])
def test_page_renders_and_play_advances(page, app_url, path, heading, charts, animated, opens_at):
    t0 = time.monotonic()
    page.goto(f"{app_url}/{path}")
    page.wait_for_function(f"document.querySelectorAll('.js-plotly-plot').length >= {charts}", timeout=150_000)
    settled(page, timeout=150_000)
    print(f"\n{path} first render: {time.monotonic() - t0:.1f} s")
    expect(page.get_by_test_id("stException")).to_have_count(0)
    expect(page.get_by_test_id("stAlertContentError")).to_have_count(0)  # no st.error box either
    expect(page.get_by_role("heading", name=heading)).to_be_visible()
    expect(page.get_by_text("Page not found")).to_have_count(0)

    plot = page.locator(".js-plotly-plot").nth(animated)
    assert _label_step(plot) == opens_at
    if path.startswith("admission"):   # its live box shows the tick: the slider is bare
        texts = plot.locator("text.slider-label").all_text_contents()   # tick labels (and any readout)
        assert texts and all(not t.strip() for t in texts), texts[:5]
    # what the frames change: the curtain shapes, and trace 0 (the live text, or the block map's z)
    state = "el => JSON.stringify([el.layout.shapes, el.data[0].text, el.data[0].z])"
    before = plot.evaluate(state)
    plot.locator(".updatemenu-button").filter(has_text="Play").click()
    seen = [opens_at]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        seen.append(_label_step(plot))
        changes = [s for i, s in enumerate(seen) if i == 0 or s != seen[i - 1]]
        if len(changes) >= 3 and changes[-1] > changes[1]:
            break
        time.sleep(0.1)
    changes = [s for i, s in enumerate(seen) if i == 0 or s != seen[i - 1]]
    assert len(changes) >= 3 and changes[-1] > changes[1], changes  # the step moves on, forwards
    plot.locator(".updatemenu-button").filter(has_text="Pause").click()
    assert plot.evaluate(state) != before
    expect(page.get_by_test_id("stException")).to_have_count(0)
    expect(page.get_by_test_id("stAlertContentError")).to_have_count(0)  # no st.error box either



def test_admission_downloads_the_schedulers_run(page, app_url):
    """Admission draws its curves without running the scheduler; a download runs it on the click
    (in Streamlit's server, outside the page's script), and the file is that run's Trace, whose
    figures at the last tick are the ones in the chart's live box."""
    page.goto(f"{app_url}/admission?adm_ticks=1000&adm_limit=4")
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 1", timeout=150_000)
    settled(page, timeout=150_000)
    live = page.locator(".js-plotly-plot g.textpoint text").first.text_content() or ""   # at tick 1,000
    with page.expect_download(timeout=120_000) as info:
        page.locator(".st-key-adm_dl_trace button:visible").first.click()
    dl = info.value
    assert dl.suggested_filename == "littles_law_no_limit.trace.gz"
    from sim.lessons.admission import window_stats
    from sim.trace import Trace
    trace = Trace.from_bytes(open(dl.path(), "rb").read())
    assert trace.source == "simulator" and len(trace.batch) > 0
    assert trace.meta["config"]["max_queued_requests"] == 0 and not trace.requests["rejected"].any()
    s = window_stats(trace, 1000)
    assert f"L {s['L']:,.2f} · λ {s['lambda']:,.4f} · W {s['W']:,.2f}" in live, live[:300]
    assert f"rejected 0 of {s['arrived']:,}" in live, live[:300]
    expect(page.get_by_test_id("stException")).to_have_count(0)
