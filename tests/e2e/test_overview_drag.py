"""Windowed playback in a real browser: drag across the overview, or type a window, and the slot
lanes redraw on it (ui/window.py)."""
from __future__ import annotations

from playwright.sync_api import expect

from live_app import poll, settled

PLOTS = "Array.from(document.querySelectorAll('.js-plotly-plot'))"
FIND = {"overview": f"{PLOTS}.find(p => p.layout && p.layout.meta && p.layout.meta.buckets !== undefined)",
        "lanes": f"{PLOTS}.find(p => p.layout && p.layout.meta && p.layout.meta.stride !== undefined)"}


def lane_span(page) -> tuple[int, int]:
    x = page.evaluate(f"() => {{ const p = {FIND['lanes']}; const x = p._fullData[0].x; "
                      "return [Number(x[0]), Number(x[x.length - 1])]; }")
    return int(x[0]), int(x[1])


def wait_lanes(page, check, timeout_s: float = 30) -> tuple[int, int]:
    return poll(lambda: lane_span(page), check, timeout_s, "the lanes did not redraw as expected", 0.2)


def test_drag_on_the_overview_and_type_a_window(page, app_url):
    page.goto(f"{app_url}/?pb_scenario=random_500&pb_win=100-300")
    page.wait_for_function(f"() => {FIND['overview']} && {FIND['lanes']}", timeout=60_000)
    settled(page, timeout=60_000)
    expect(page.get_by_test_id("stException")).to_have_count(0)
    assert wait_lanes(page, lambda s: s == (100, 300)) == (100, 300)
    # the overview's declared margins hold its legend and axes: Plotly draws it once
    declared, drawn = page.evaluate(f"""() => {{ const gd = {FIND['overview']}; const m = gd._fullLayout.margin;
        const s = gd._fullLayout._size; return [[m.l, m.r, m.t, m.b], [s.l, s.r, s.t, s.b]]; }}""")
    assert all(abs(d - n) <= 1 for d, n in zip(declared, drawn)), (declared, drawn)

    # drag across the top row of the overview, from step 500 to step 700
    box = page.evaluate(f"""() => {{
        const p = {FIND['overview']}; const r = p.getBoundingClientRect(); const L = p._fullLayout;
        const px = v => r.left + L.xaxis._offset + L.xaxis.l2p(v);
        return {{x0: px(500), x1: px(700), y: r.top + L.yaxis._offset + L.yaxis._length / 2}}; }}""")
    page.mouse.move(box["x0"], box["y"])
    page.mouse.down()
    page.mouse.move(box["x1"], box["y"], steps=12)
    page.mouse.up()
    first, last = wait_lanes(page, lambda s: abs(s[0] - 500) <= 3 and abs(s[1] - 700) <= 3)
    assert abs(first - 500) <= 3 and abs(last - 700) <= 3
    assert f"pb_win={first}-{last}" in page.url

    # the keyboard's way: type the first step
    box = page.get_by_label("First step")
    box.fill("600")
    box.press("Enter")
    assert wait_lanes(page, lambda s: s[0] == 600) == (600, last)
    expect(page.get_by_test_id("stException")).to_have_count(0)
