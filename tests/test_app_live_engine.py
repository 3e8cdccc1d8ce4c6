"""The Live engine page under AppTest: start a tiny run, add requests by hand, wait for it, and
find the run's views and the comparison with the simulator. A second session only watches.

AppTest does not tick run_every fragments (stack.md §3), so the test reruns the whole script
while it waits; each rerun runs the live panel once, which stops the engine when every request
is done ("Stop when every request is done" is on by default).
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from plotly_util import chart_specs

APP = str(Path(__file__).resolve().parents[1] / "app.py")
PAGE = "pages/live_engine.py"


def _service():
    from engine.service import get_service
    return get_service()


def _open() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page(PAGE).run()
    assert not at.exception, at.exception
    return at


@pytest.fixture
def at():
    a = _open()
    yield a
    svc = _service()  # the engine is a process-wide singleton: leave it stopped and free
    d = svc.driver
    if d is not None:
        svc.stop(d)
        svc.release(d)
    st.cache_resource.clear()


def _wait_stopped(at: AppTest, timeout: float = 90.0) -> None:
    svc = _service()
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        time.sleep(0.3)
        at.run()
        assert not at.exception, at.exception
        if not svc.running:
            at.run()  # the run after the stop draws the run's views
            return
    raise AssertionError(f"the engine did not finish within {timeout} s")


def _texts(at: AppTest) -> str:
    return " ".join([m.value for m in at.markdown] + [h.value for h in at.header] + [h.value for h in at.subheader])


def test_idle_page_offers_start_and_the_settings(at):
    assert at.button(key="le_start").label == "Start"
    assert at.button(key="le_stop").disabled and at.button(key="le_add_send").disabled
    assert at.selectbox(key="keep_le_model").value == "tiny"
    # torch loads in the background: the device is named once it has (the page says so meanwhile)
    deadline = time.monotonic() + 120
    while "device **cpu**" not in _texts(at) and "device **cuda**" not in _texts(at):
        assert "PyTorch is loading" in _texts(at)
        assert time.monotonic() < deadline, "torch did not load"
        time.sleep(0.5)
        at.run()
    assert any("Nothing has run yet" in i.value for i in at.info)


def test_a_tiny_run_by_hand_then_its_trace_and_the_simulator(at):
    at.number_input(key="keep_le_blocks").set_value(16)
    at.number_input(key="keep_le_block_size").set_value(8)
    at.number_input(key="keep_le_budget").set_value(32)
    at.selectbox(key="keep_le_preset").set_value("none")
    at.button(key="le_start").click().run()
    assert not at.exception, at.exception
    svc = _service()
    assert svc.running and svc.driver == at.session_state["le_session"]
    assert at.button(key="le_start").label == "Restart"

    # a second browser session watches, read-only
    watcher = AppTest.from_file(APP, default_timeout=120)
    watcher.switch_page(PAGE).run()
    assert any("Another browser session is driving" in i.value for i in watcher.info)
    assert watcher.button(key="le_start").disabled and watcher.button(key="le_add_send").disabled

    at.text_area(key="le_add_text").input("the quick brown fox jumps over the lazy dog . " * 3)
    at.number_input(key="le_add_max").set_value(6)
    at.button(key="le_add_send").click().run()
    assert any("Sent u1: 30 prompt tokens" in s.value for s in at.success)
    at.text_area(key="le_add_text").input("")
    at.number_input(key="le_add_len").set_value(40)
    at.text_input(key="le_add_tenant").input("B")
    at.button(key="le_add_send").click().run()
    assert any("Sent u2: 40 prompt tokens" in s.value for s in at.success)
    _wait_stopped(at)

    assert not svc.running and svc.driver is None  # stopping gives the wheel back
    specs = chart_specs(at)
    assert {"le_live_fig", "le_live_kv", "le_occupancy", "le_phases", "le_step_tokens", "le_kv_map",
            "le_calibration"} <= set(specs)
    assert "The run" in _texts(at) and "Compare with the simulator" in _texts(at)
    assert specs["le_occupancy"]["layout"]["meta"]["frames"] >= 3
    steps = int(next(m.value for m in at.metric if m.label == "Steps"))
    assert steps >= 6 and int(next(m.value for m in at.metric if m.label == "Step")) == steps
    tables = [d.value for d in at.dataframe]
    text = next(t for t in tables if "text" in t.columns)
    assert text["tokens"].tolist() == ["6 / 6", "6 / 6"] and text["status"].tolist() == ["finished"] * 2
    cmp = next(t for t in tables if "simulated / measured" in t.columns)
    assert "Mean TTFT (ms)" in cmp["metric"].tolist() and cmp["measured"].notna().all()
    ttft = next(t for t in tables if {"measured", "simulated", "difference"} <= set(t.columns))
    assert ttft["request"].tolist() == ["u1", "u2"]
    assert any("step time =" in m.value for m in at.markdown)
    assert {b.key for b in at.get("download_button")} >= {"le_dl_trace", "le_dl_csv", "le_dl_perfetto",
                                                          "le_dl_workload"}
