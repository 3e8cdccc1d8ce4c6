"""The browser's Plotly (serve.py's slim chunk) knows exactly the trace types the figures draw,
and every trace of the pages' charts finds its module there (Plotly hides a trace of a type it
does not know, and only logs it)."""
from __future__ import annotations

import pytest

from figures.common import TRACE_TYPES
from live_app import settled  # tests/e2e is on sys.path

# every trace of every chart on the page, and whether Plotly found its module
TRACES = """() => [...document.querySelectorAll('.js-plotly-plot')].flatMap(
    el => (el._fullData || []).map(t => [t.type, Boolean(t._module)]))"""


@pytest.mark.parametrize("path,charts", [("", 3), ("kv_memory", 3), ("llama_log", 3)])
def test_pages_charts_use_only_registered_trace_types(page, app_url, path, charts):
    page.goto(f"{app_url}/{path}")
    page.wait_for_function(f"document.querySelectorAll('.js-plotly-plot .main-svg').length >= {charts}",
                           timeout=60_000)
    settled(page, timeout=60_000)
    registered = page.evaluate("() => Object.keys(window.Plotly.PlotSchema.get().traces).sort()")
    assert registered == sorted(TRACE_TYPES)
    traces = page.evaluate(TRACES)
    assert traces and all(found for _, found in traces), traces
    assert {t for t, _ in traces} <= set(TRACE_TYPES)
    # a scattergl trace (the pages draw one past ~2,000 points) draws as well
    n = page.evaluate("""async () => {
        const el = document.createElement('div'); document.body.appendChild(el);
        await window.Plotly.newPlot(el, [{type: 'scattergl', x: [1, 2, 3], y: [3, 1, 2], mode: 'markers'}]);
        return el._fullData.filter(t => t._module && t.visible === true).length }""")
    assert n == 1
