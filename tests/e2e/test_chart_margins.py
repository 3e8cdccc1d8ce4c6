"""Every chart's declared margins already hold its axes, legend and slider (at the tests'
1400 px window), so Plotly draws it once. When a tick label, legend or slider needs more room
than the margin declares, Plotly widens the margin and draws the whole chart a second time
(plots.doAutoMargin): 70-550 ms a page in CPU profiles before the margins were set. And no
axis has Plotly measure its tick labels to hide those past the chart (the template's
ticklabeloverflow "allow", figures.common), and no second axis takes the first's tick grid (an
overlaying axis' default, "sync", labels it 24.2, 48.4, ...)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from live_app import settled  # tests/e2e is on sys.path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from bench_pages import pages_from_app  # noqa: E402  (bench/ is not a package)

# the Live engine page draws its charts only once an engine runs (Choosing settings opens on its
# default search's charts; tests/e2e/test_choosing_settings.py checks them after a search too)
PAGES = [p for p in pages_from_app() if p["url_path"] not in ("live_engine",)]

# each chart's margins as declared and as Plotly drew them, and whether its data traces are in
MARGINS = r"""() => [...document.querySelectorAll('.js-plotly-plot')].map(gd => {
    const m = gd._fullLayout.margin, s = gd._fullLayout._size;
    const axes = Object.keys(gd._fullLayout).filter(k => /^[xy]axis\d*$/.test(k));
    return {declared: [m.l, m.r, m.t, m.b], drawn: [s.l, s.r, s.t, s.b], traces: (gd.data || []).length,
            overflow: axes.map(k => gd._fullLayout[k].ticklabeloverflow),
            synced: axes.filter(k => gd._fullLayout[k].tickmode === 'sync')};
})"""


@pytest.mark.parametrize("p", PAGES, ids=[p["url_path"] for p in PAGES])
def test_charts_fit_their_declared_margins(page, app_url, p):
    page.goto(f"{app_url}/" if p["default"] else f"{app_url}/{p['url_path']}")
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot .main-svg').length >= 1", timeout=150_000)
    settled(page, timeout=150_000)
    page.wait_for_timeout(1500)   # the last charts draw after the script ends
    charts = [c for c in page.evaluate(MARGINS) if c["traces"]]
    assert charts, "no chart drawn"
    pushed = [(i, c["declared"], c["drawn"]) for i, c in enumerate(charts)
              if any(abs(d - n) > 1 for d, n in zip(c["declared"], c["drawn"]))]
    assert not pushed, f"charts whose margins Plotly had to widen (index, [l, r, t, b] declared, drawn): {pushed}"
    hiding = [(i, c["overflow"]) for i, c in enumerate(charts) if set(c["overflow"]) - {"allow"}]
    assert not hiding, f"charts whose axes hide tick labels past the chart (index, per axis): {hiding}"
    # an overlaying axis defaults to "sync" ticks: the other axis' grid in its own units (24.2, 48.4)
    synced = [(i, c["synced"]) for i, c in enumerate(charts) if c["synced"]]
    assert not synced, f"charts with an axis on another's tick grid, not round ticks (index, axes): {synced}"
