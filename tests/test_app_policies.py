"""The Policies and starvation page under AppTest: the lesson's Example 6 by default; controls change the runs."""
from __future__ import annotations


import pytest
from streamlit.testing.v1 import AppTest

from app_util import open_page as _open_page
from plotly_util import chart_specs



def page(**params) -> AppTest:
    return _open_page("policies.py", 180, **params)


def metrics(at) -> dict:
    return {m.label: m.value for m in at.metric}


def test_default_page_reproduces_example_6():
    at = page()
    m = metrics(at)
    assert (m["Mean wait, FCFS"], m["Mean wait, Shortest-first"], m["Mean wait, Priority"]) == ("43.17", "37.00", "47.83")
    assert (m["LONG starts, no aging"], m["LONG starts, aging 1"]) == ("80", "28")
    specs = chart_specs(at)
    assert specs["pol_service"]["layout"]["meta"]["order"] == {
        "FCFS": list("ABCDEF"), "Shortest-first": list("ADFBCE"), "Priority": list("ABECDF")}
    assert specs["pol_ages"]["layout"]["meta"]["starts"] == {
        "Shortest-first, no aging": 80, "Shortest-first, aging 1 per unit waited": 28}
    table = at.dataframe[0].value
    assert table["order"].tolist() == ["A B C D E F", "A D F B C E", "A B E C D F"]
    assert (table["order"] + "  " + table["mean wait"].map("{:.2f}".format)).tolist() == table["lesson prints"].tolist()
    assert "The lesson's Example 6" in " ".join(md.value for md in at.markdown)
    assert not at.error


def test_aging_controls_change_the_runs():
    at = page()
    at.toggle(key="keep_pol_with_aging").set_value(True).run()
    meta = chart_specs(at)["pol_service"]["layout"]["meta"]
    assert meta["order"]["Shortest-first + aging"] == list("ADBFCE")
    assert meta["order"]["Priority + aging"] == list("ABCDEF")
    assert meta["mean_wait"]["Shortest-first + aging"] == 37.33
    at.number_input(key="keep_pol_aging").set_value(0.5).run()
    assert not at.exception
    starts = chart_specs(at)["pol_ages"]["layout"]["meta"]["starts"]
    assert starts == {"Shortest-first, no aging": 80, "Shortest-first, aging 0.5 per unit waited": 56}
    assert at.query_params["pol_aging"] == "0.5"  # the setting is in the link


def test_jobs_and_stream_from_the_link_and_bad_jobs():
    at = page(pol_jobs="X,0,3,1; Y,0,1,0; Z,1,2,1", pol_count="10")
    order = chart_specs(at)["pol_service"]["layout"]["meta"]["order"]
    assert order["FCFS"] == list("XYZ") and order["Shortest-first"] == list("YZX") and order["Priority"] == list("YXZ")
    assert metrics(at)["LONG starts, no aging"] == "20"  # the stream of 10 short jobs ends at 20
    at.text_area(key="keep_pol_jobs").set_value("A,0,0,1").run()
    assert not at.exception
    assert "Could not read the jobs" in at.error[0].value
    at.button(key="pol_reset").click().run()
    assert not at.error and metrics(at)["Mean wait, FCFS"] == "43.17"
