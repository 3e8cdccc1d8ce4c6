"""ui/state in a running app (AppTest, on the Playback page): settings from the link, written
back to the link, saved and loaded as a file."""
from __future__ import annotations

import json
from pathlib import Path

from streamlit.testing.v1 import AppTest

from ui.state import FORMAT

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def app(**params) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, at.exception
    return at


def test_a_link_sets_the_widgets_and_the_url_follows_them():
    at = app(pb_scenario="preemption_pressure", pb_budget="32", pb_step="17")
    assert at.selectbox(key="keep_pb_scenario").value == "preemption_pressure"
    assert at.number_input(key="keep_pb_budget").value == 32  # the link wins over the scenario's 64
    assert at.number_input(key="keep_pb_blocks").value == 31  # the rest comes from the scenario
    assert at.slider(key="keep_pb_step").value == 17  # not reset to the run's "interesting" step
    assert not at.warning
    assert at.query_params["pb_budget"] == "32" and at.query_params["pb_blocks"] == "31"
    at.number_input(key="keep_pb_max_seqs").set_value(4).run()
    assert at.query_params["pb_max_seqs"] == "4"
    at.slider(key="keep_pb_step").set_value(20).run()  # scrubbing (in a fragment) updates the link too
    assert at.query_params["pb_step"] == "20"


def test_a_bad_link_value_is_ignored_with_a_warning():
    at = app(pb_max_seqs="lots", pb_policy="magic")
    assert at.number_input(key="keep_pb_max_seqs").value == 3  # lesson_abc's own value
    assert at.selectbox(key="keep_pb_policy").value == "fcfs"
    text = " ".join(w.value for w in at.warning)
    assert "pb_max_seqs must be a whole number" in text and "pb_policy must be one of" in text
    assert not at.error


def test_settings_file_loads_and_a_bad_one_changes_nothing():
    at = app()
    good = {"format": FORMAT, "page": "pb",
            "settings": {"pb_scenario": "lesson_abc", "pb_budget": 16, "pb_step": 5, "pb_policy": "spf"}}
    at.file_uploader(key="ui_pb_settings_file").upload("s.json", json.dumps(good).encode(), "application/json").run()
    assert not at.exception and not at.error
    assert at.number_input(key="keep_pb_budget").value == 16
    assert at.selectbox(key="keep_pb_policy").value == "spf"
    assert at.slider(key="keep_pb_step").value == 5
    assert at.query_params["pb_budget"] == "16"
    bad = {**good, "settings": {"pb_budget": -3}}
    at.file_uploader(key="ui_pb_settings_file").upload("b.json", json.dumps(bad).encode(), "application/json").run()
    assert not at.exception
    assert at.error and "Could not load b.json: pb_budget must be from 1" in at.error[0].value
    assert at.number_input(key="keep_pb_budget").value == 16
