"""Compare page (and the shared settings/exports) in a real browser.

- Play on the lock-step figure advances A and B together; the one server-side scrubber moves both.
- The Perfetto export downloads and parses.
- A setting survives a page switch; a link with query parameters reproduces the settings.
"""
from __future__ import annotations

import json
import re
import time

from playwright.sync_api import Page, expect
from live_app import settled  # tests/e2e is on sys.path

LOCKSTEP = ".st-key-lockstep .js-plotly-plot"


def wait_ready(page: Page, charts: int) -> None:
    # generous: on a shared 2-core box under load a first render has taken over 60 s
    page.wait_for_function(f"document.querySelectorAll('.js-plotly-plot').length >= {charts}", timeout=90_000)
    settled(page, timeout=60_000)
    expect(page.get_by_test_id("stException")).to_have_count(0)
    expect(page.get_by_test_id("stAlertContentError")).to_have_count(0)  # no st.error box either


def veils(page: Page) -> tuple[float, float, int]:
    """(A's veil x0, B's veil x0, the Plotly slider's step) of the lock-step figure."""
    x0 = page.evaluate(f"""() => {{
        const gd = document.querySelector('{LOCKSTEP}');
        const s = gd.layout.shapes;
        return [s[0].x0, s[2].x0, s[0].xref, s[2].xref];
    }}""")
    assert x0[2:] == ["x", "x2"]
    label = page.locator(LOCKSTEP).locator("text.slider-label").first.text_content() or ""
    m = re.search(r"step (\d+)", label)
    assert m, label
    return x0[0], x0[1], int(m.group(1))


def side_steps(page: Page) -> tuple[int, int]:
    """The step each side of the scrubbed inspector says it shows."""
    text = page.locator("[data-testid=stMarkdownContainer]").filter(has_text=re.compile(r"^[AB] at step")).all_inner_texts()
    steps = {t[0]: int(re.match(r"[AB] at step (\d+)", t).group(1)) for t in text}
    return steps["A"], steps["B"]


def test_compare_plays_and_scrubs_both_sides_together(page: Page, app_url: str):
    t0 = time.monotonic()
    page.goto(f"{app_url}/compare")
    wait_ready(page, 4)
    print(f"\ncompare first render: {time.monotonic() - t0:.1f} s")
    expect(page.get_by_role("heading", name="Compare", exact=True)).to_be_visible()
    # a direct link on a fresh server still goes through app.py's router (not the pages/ folder mode)
    expect(page.get_by_role("link", name="app", exact=True)).to_have_count(0)
    expect(page.get_by_role("link", name="Playback")).to_be_visible()

    a, b, step = veils(page)
    assert step == 7 and a == b == 7.5  # opens fully shown
    page.locator(LOCKSTEP).locator(".updatemenu-button").filter(has_text="Play").click()
    seen = []
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        seen.append(veils(page))
        if len({s[2] for s in seen}) >= 3:
            break
        time.sleep(0.1)
    assert len({s[2] for s in seen}) >= 3, seen  # the step advanced ...
    assert all(a == b for a, b, _ in seen), seen  # ... on both sides at once

    # the server-side scrubber: one slider, both inspectors follow
    assert side_steps(page) == (5, 5)  # the first step where A and B differ
    slider = page.locator(".st-key-keep_cmp_step input[type=range]")
    slider.focus()
    page.keyboard.press("ArrowLeft")
    expect(page.locator(".st-key-keep_cmp_step [data-testid=stSliderThumbValue]")).to_have_text("4", timeout=20_000)
    expect(page.get_by_text(re.compile(r"^A at step 4"))).to_be_visible(timeout=20_000)
    expect(page.get_by_text(re.compile(r"^B at step 4"))).to_be_visible(timeout=20_000)
    settled(page, timeout=20_000)
    page.locator(".st-key-cmp_next button:visible").first.click()
    expect(page.get_by_text(re.compile(r"^A at step 5"))).to_be_visible(timeout=20_000)
    expect(page.get_by_text(re.compile(r"^B at step 5"))).to_be_visible(timeout=20_000)
    assert "cmp_step=5" in page.url


def test_perfetto_export_downloads_and_parses(page: Page, app_url: str):
    page.goto(f"{app_url}/compare")
    wait_ready(page, 4)
    with page.expect_download(timeout=60_000) as info:
        page.locator(".st-key-cmp_b_dl_perfetto button:visible").first.click()
    dl = info.value
    assert dl.suggested_filename == "lesson_abc.B.perfetto.json"
    doc = json.loads(open(dl.path(), "rb").read())
    events = doc["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    assert {e["args"]["request"] for e in slices} == {"A", "B", "C"}
    assert any(e["ph"] == "C" and e["name"] == "free KV blocks" for e in events)
    assert not any(e["ph"] == "i" and e["name"].startswith("preempt") for e in events)  # B: 16 blocks, none


def test_settings_survive_a_page_switch_and_a_link_reproduces_them(page: Page, app_url: str):
    page.goto(app_url)
    wait_ready(page, 3)
    budget = page.locator(".st-key-keep_pb_budget input")
    budget.fill("16")
    budget.press("Enter")
    expect(page).to_have_url(re.compile(r"pb_budget=16"), timeout=20_000)
    wait_ready(page, 3)

    page.get_by_role("link", name="Compare").click()
    wait_ready(page, 4)
    expect(page.get_by_role("heading", name="Compare", exact=True)).to_be_visible()
    page.get_by_role("link", name="Playback").click()
    wait_ready(page, 3)
    expect(page.locator(".st-key-keep_pb_budget input")).to_have_value("16", timeout=20_000)
    expect(page).to_have_url(re.compile(r"pb_budget=16"), timeout=20_000)

    # a colleague opens a link: the same settings, the same scrubbed step
    page.goto(f"{app_url}/compare?cmp_b_budget=16&cmp_b_policy=spf&cmp_step=2")
    wait_ready(page, 4)
    expect(page.locator(".st-key-keep_cmp_b_budget input")).to_have_value("16", timeout=20_000)
    expect(page.locator(".st-key-keep_cmp_a_budget input")).to_have_value("8")
    expect(page.locator(".st-key-keep_cmp_b_policy input")).to_have_value("Shortest prompt first")
    expect(page.locator(".st-key-keep_cmp_step [data-testid=stSliderThumbValue]")).to_have_text("2")
    assert side_steps(page) == (2, 2)
