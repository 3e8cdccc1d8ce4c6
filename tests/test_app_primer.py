"""app.py sends an empty Plotly chart first (so the browser starts loading Plotly's JavaScript
while the page computes) and removes it when the page is done, also on pages that stop early."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def _chart_ids(at: AppTest) -> list[str]:
    return [el.proto.id for el in at.get("plotly_chart")]


@pytest.mark.parametrize("page", ["pages/live_engine.py", "pages/why_batch.py"])
def test_primer_is_gone_after_the_first_run(page):
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page(page)
    at.run()
    assert not at.exception
    assert at.session_state["_plotly_primed"] is True  # it was sent on this first run
    assert not [i for i in _chart_ids(at) if "_plotly_primer" in i]
    if page.endswith("why_batch.py"):
        assert _chart_ids(at)  # the page's own chart is still there


def test_primer_is_gone_when_a_page_stops_early():
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state["keep_pb_source"] = "Upload a workload JSON"  # no file yet: the page says so and stops
    at.run()
    assert not at.exception
    assert any("Upload a workload JSON" in i.value for i in at.info) and at.session_state["_plotly_primed"]
    assert not [i for i in _chart_ids(at) if "_plotly_primer" in i]
