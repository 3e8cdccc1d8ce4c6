"""The Tenants and fairness page under AppTest: the lesson's Example 9 by default, controls change the data."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from plotly_util import chart_specs, decode

APP = str(Path(__file__).resolve().parents[1] / "app.py")


@pytest.fixture
def at():
    a = AppTest.from_file(APP, default_timeout=90)
    a.switch_page("pages/tenants.py").run()  # straight to the page (no Playback run first)
    assert not a.exception, a.exception
    return a


def run_bars(spec: dict, run: str, tenant: str, state: str) -> dict:
    return next(t for t in spec["data"] if t.get("meta") == {"run": run, "tenant": tenant, "state": state})


def finish_labels(at, run: str) -> list[str]:
    return run_bars(chart_specs(at)["ten_timelines"], run, "B", "finish labels")["text"]


def test_default_reproduces_lesson_example_9(at):
    assert [(m.label, m.value) for m in at.metric] == [
        ("FCFS", "B1@40 B0@40"), ("Round-robin by tenant", "B1@20 B0@20"),
        ("Round-robin + per-tenant cap", "B0@11 B1@20"), ("VTC (Virtual Token Counter)", "B1@20 B0@20")]
    table = next(d.value for d in at.dataframe if "B finished" in d.value.columns)
    assert table["B finished"].tolist() == ["B1@40 B0@40", "B1@20 B0@20", "B0@11 B1@20", "B1@20 B0@20"]
    assert table["largest gap"].tolist() == [184, 72, 32, 72] and table["within bound"].all()
    specs = chart_specs(at)
    assert {"ten_timelines", "ten_gap", "ten_counters"} <= set(specs)
    assert finish_labels(at, "cap") == ["B0@11", "B1@20"]
    assert "= **288**" in " ".join(m.value for m in at.markdown)  # the bound, 2 * max(1 * 8, 2 * 72)
    assert at.slider(key="keep_ten_step").value == 1 and not at.error


def test_cap_changes_the_capped_run(at):
    at.number_input(key="keep_ten_cap").set_value(1).run()
    assert not at.exception
    assert finish_labels(at, "cap") == ["B0@11", "B1@21"]  # B is held to 1 slot too: B1 waits for B0
    assert finish_labels(at, "fcfs") == ["B0@40", "B1@40"]  # the other runs do not change


def test_slots_change_every_run(at):
    at.number_input(key="keep_ten_slots").set_value(7).run()
    assert not at.exception
    fcfs = run_bars(chart_specs(at)["ten_timelines"], "fcfs", "A", "running")
    assert max(decode(fcfs["base"])) == 10  # 12 of A's requests in 2 waves of 7 slots


def test_vtc_weights_change_the_counters(at):
    before = decode(chart_specs(at)["ten_counters"]["data"][0]["y"]).max()
    at.number_input(key="keep_ten_w_out").set_value(4.0).run()
    assert not at.exception
    after = decode(chart_specs(at)["ten_counters"]["data"][0]["y"]).max()
    assert after > before


def test_flood_scenario_shows_vtc_ahead_of_round_robin(at):
    at.selectbox(key="keep_ten_scenario").set_value("tenant_flood").run()
    assert not at.exception and not at.error
    assert at.number_input(key="keep_ten_slots").value == 8 and at.number_input(key="keep_ten_cap").value == 6
    table = next(d.value for d in at.dataframe if "light mean latency" in d.value.columns)
    lat = dict(zip(table["scheduler"], table["light mean latency"]))
    assert lat["FCFS"] > 300 and lat["VTC (Virtual Token Counter)"] < lat["Round-robin by tenant"]
    assert table["within bound"].tolist() == [False, True, True, True]
    at.number_input(key="keep_ten_light_every").set_value(3).run()
    assert not at.exception
    table2 = next(d.value for d in at.dataframe if "light mean latency" in d.value.columns)
    assert table2["light mean latency"].tolist() != table["light mean latency"].tolist()


def test_scrubbing_moves_the_cursor_and_the_state_table(at):
    at.slider(key="keep_ten_step").set_value(11).run()
    assert not at.exception
    assert chart_specs(at)["ten_gap"]["layout"]["shapes"][0]["x0"] == 11
    state = next(d.value for d in at.dataframe if "B: running" in d.value.columns)
    assert state["B: running"].tolist() == [0, 2, 2, 2]  # FCFS still holds B back
    at.button(key="ten_next").click().run()
    assert at.slider(key="keep_ten_step").value == 12
