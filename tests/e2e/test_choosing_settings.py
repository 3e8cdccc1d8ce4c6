"""Choosing settings in a real browser: the page opens on a result (the default search, already
run: its frontier and heatmap drawn with no click); a small search draws the frontier and the
goodput heatmap (within their declared margins), its link opens the best config on Playback, and
Stop stops a bigger search part way."""
from __future__ import annotations

import re
from urllib.parse import parse_qsl, urljoin, urlsplit

from playwright.sync_api import Page, expect

from test_chart_margins import MARGINS
from live_app import settled  # tests/e2e is on sys.path

LINK = "Open the best config on Playback"


def _idle(page: Page) -> None:
    settled(page, timeout=120_000)
    expect(page.get_by_test_id("stException")).to_have_count(0)
    expect(page.get_by_test_id("stAlertContentError")).to_have_count(0)


EXAMPLE = "already run"   # the line above the default search shown beside other settings


def _frontier_of(page: Page, configs: int) -> None:
    """Wait until the frontier drawn is that of a search of `configs` configs."""
    page.wait_for_function(
        f"""[...document.querySelectorAll('.js-plotly-plot')].some(g => (g.data || []).length && g.layout.meta
            && g.layout.meta.frontier && g.layout.meta.configs === {configs})""", timeout=120_000)


def test_the_page_opens_on_a_result_with_its_charts_drawn(page: Page, app_url: str):
    page.goto(f"{app_url}/choosing_settings")
    expect(page.get_by_role("heading", name="Choosing settings")).to_be_visible(timeout=120_000)
    # no click: the default search is already run, its frontier and heatmap drawn
    page.wait_for_function("[...document.querySelectorAll('.js-plotly-plot')].filter(g => (g.data || []).length)"
                           ".length >= 2", timeout=120_000)
    _idle(page)
    meta = page.evaluate("""() => [...document.querySelectorAll('.js-plotly-plot')]
        .filter(g => (g.data || []).length).map(g => g.layout.meta)""")
    front = next(m for m in meta if "frontier" in m)
    heat = next(m for m in meta if "z" in m)
    assert front["configs"] == 9 and front["ttft_slo"] == 4000 and 1 <= front["best"] <= 9
    assert heat["x"] == ["8", "16", "32"] and heat["y"] == ["128", "256", "512"]
    expect(page.get_by_text("Already run: the page's default search")).to_be_visible()
    expect(page.get_by_role("link", name=LINK)).to_be_visible()
    expect(page.get_by_role("button", name="Run the search")).to_be_enabled()
    # Run the search runs it again, here, and lands on the same table
    page.get_by_role("button", name="Run the search").click()
    expect(page.get_by_text("Already run: the page's default search")).to_have_count(0, timeout=60_000)
    expect(page.get_by_role("link", name=LINK)).to_be_visible(timeout=120_000)
    _idle(page)
    _frontier_of(page, 9)
    again = page.evaluate("""() => [...document.querySelectorAll('.js-plotly-plot')]
        .filter(g => (g.data || []).length).map(g => g.layout.meta)""")
    assert next(m for m in again if "frontier" in m)["best"] == front["best"]


def test_a_small_search_draws_its_charts_and_links_to_playback(page: Page, app_url: str):
    page.goto(f"{app_url}/choosing_settings?cs_v_max_num_seqs=8%2C+32&cs_v_max_num_batched_tokens=128%2C+512")
    expect(page.get_by_role("heading", name="Choosing settings")).to_be_visible(timeout=120_000)
    _idle(page)
    expect(page.get_by_text("4 configs × 500 requests")).to_be_visible()
    expect(page.get_by_text(EXAMPLE)).to_be_visible()   # the default search, until this one runs
    page.get_by_role("button", name="Run the search").click()
    expect(page.get_by_text(EXAMPLE)).to_have_count(0, timeout=60_000)
    expect(page.get_by_role("link", name=LINK)).to_be_visible(timeout=120_000)
    _idle(page)
    _frontier_of(page, 4)
    page.wait_for_timeout(1000)
    meta = page.evaluate("""() => [...document.querySelectorAll('.js-plotly-plot')]
        .filter(g => (g.data || []).length).map(g => g.layout.meta)""")
    front = next(m for m in meta if "frontier" in m)
    heat = next(m for m in meta if "z" in m)
    assert front["configs"] == 4 and front["ttft_slo"] == 4000
    assert heat["x"] == ["8", "32"] and heat["y"] == ["128", "512"]
    goodput = [v for row in heat["z"] for v in row]
    assert all(v is not None and v >= 0 for v in goodput)
    charts = [c for c in page.evaluate(MARGINS) if c["traces"]]
    pushed = [(c["declared"], c["drawn"]) for c in charts
              if any(abs(d - n) > 1 for d, n in zip(c["declared"], c["drawn"]))]
    assert not pushed, pushed
    # the best config: most goodput; its link carries its knobs to Playback
    best = front["best"]
    i = best - 1
    want_seqs, want_budget = [8, 32][i // 2], [128, 512][i % 2]
    assert heat["z"][i % 2][i // 2] == max(goodput)
    href = page.get_by_role("link", name=LINK).get_attribute("href")
    query = dict(parse_qsl(urlsplit(href).query))
    assert query["pb_max_seqs"] == str(want_seqs) and query["pb_budget"] == str(want_budget)

    page.goto(urljoin(page.url, href))
    expect(page.get_by_role("heading", name="Playback")).to_be_visible(timeout=120_000)
    expect(page.get_by_text("Page not found")).to_have_count(0)   # the link names the app's root, not a path
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 3", timeout=120_000)
    _idle(page)
    seqs = page.get_by_role("spinbutton", name="Max sequences")
    budget = page.get_by_role("spinbutton", name="Token budget / step")
    expect(seqs).to_have_value(str(want_seqs))
    expect(budget).to_have_value(str(want_budget))
    assert f"pb_max_seqs={want_seqs}" in page.url   # Playback's own link keeps them


def test_stop_ends_a_search_part_way(page: Page, app_url: str):
    page.goto(f"{app_url}/choosing_settings?cs_knobs=max_num_seqs%2Cmax_num_batched_tokens%2Cpolicy"
              "&cs_v_max_num_seqs=4%2C8%2C12%2C16%2C24%2C32&cs_v_policy=fcfs%2Csjf%2Cspf")
    expect(page.get_by_role("heading", name="Choosing settings")).to_be_visible(timeout=120_000)
    _idle(page)
    expect(page.get_by_text("54 configs × 500 requests")).to_be_visible()
    page.get_by_role("button", name="Run the search").click()
    expect(page.get_by_text(re.compile(r"[1-9]\d* of 54 configs run"))).to_be_visible(timeout=60_000)
    page.locator(".st-key-cs_stop_button button").click()   # (the header has a Stop of its own)
    warning = page.get_by_text(re.compile(r"Stopped after \d+ of 54 configs"))
    expect(warning).to_be_visible(timeout=60_000)
    _idle(page)
    done = int(re.search(r"Stopped after (\d+)", warning.inner_text()).group(1))
    assert 0 < done < 54   # stopped part way: some ran, not all
    expect(page.get_by_role("link", name=LINK)).to_be_visible()   # the best of those it ran
    expect(page.get_by_role("button", name="Run the search")).to_be_enabled()


def test_on_worker_processes_the_search_finishes_in_the_background(page: Page, app_url: str):
    # the real server has threads: its workers come from a forkserver, and the page polls them
    page.goto(f"{app_url}/choosing_settings?cs_v_max_num_seqs=8%2C+32&cs_v_max_num_batched_tokens=128%2C+512"
              "&cs_backend=workers&cs_workers=2")
    expect(page.get_by_role("heading", name="Choosing settings")).to_be_visible(timeout=120_000)
    _idle(page)
    expect(page.get_by_role("radio", name="Local worker processes")).to_be_checked()
    expect(page.get_by_role("spinbutton", name="Worker processes")).to_have_value("2")
    page.get_by_role("button", name="Run the search").click()
    expect(page.get_by_text(EXAMPLE)).to_have_count(0, timeout=60_000)
    expect(page.get_by_role("link", name=LINK)).to_be_visible(timeout=120_000)
    _idle(page)
    _frontier_of(page, 4)
    meta = page.evaluate("""() => [...document.querySelectorAll('.js-plotly-plot')]
        .filter(g => (g.data || []).length).map(g => g.layout.meta)""")
    front = next(m for m in meta if "frontier" in m)
    assert front["configs"] == 4 and 1 <= front["best"] <= 4
    expect(page.get_by_text(re.compile(r"Stopped after"))).to_have_count(0)
