"""ui/state's pure parts: settings parsed from the URL and from a settings file, and written back."""
from __future__ import annotations

import json

import pytest

from ui.state import FORMAT, Setting, from_url, parse_settings_json, settings_json, url_params

S = [
    Setting("keep_t_scenario", "lesson_abc", str, choices=("lesson_abc", "random_500")),
    Setting("keep_t_budget", 8, int, bounds=(1, 1000)),
    Setting("keep_t_prefix", False, bool),
    Setting("keep_t_aging", 0.5, float, bounds=(0.0, 10.0)),
    Setting("keep_t_step", None, int),
]
BY = {s.key: s for s in S}


def test_key_must_persist_and_type_must_be_plain():
    with pytest.raises(ValueError, match="keep_"):
        Setting("budget", 8, int)
    with pytest.raises(ValueError, match="type"):
        Setting("keep_x", [], list)
    assert BY["keep_t_budget"].param == "t_budget"


@pytest.mark.parametrize("key,raw,value", [
    ("keep_t_budget", "64", 64), ("keep_t_budget", " 7 ", 7),
    ("keep_t_prefix", "true", True), ("keep_t_prefix", "0", False), ("keep_t_prefix", "Off", False),
    ("keep_t_aging", "2.5", 2.5), ("keep_t_scenario", "random_500", "random_500"),
    ("keep_t_step", "", None), ("keep_t_step", "12", 12),
])
def test_parse_url_text(key, raw, value):
    assert BY[key].parse(raw) == value
    if value is not None:
        assert BY[key].parse(BY[key].encode(value)) == value  # round trip


@pytest.mark.parametrize("key,raw,message", [
    ("keep_t_budget", "abc", "whole number"), ("keep_t_budget", "1.5", "whole number"),
    ("keep_t_budget", "0", "from 1 to 1,000"), ("keep_t_prefix", "maybe", "true or false"),
    ("keep_t_scenario", "nope", "must be one of"), ("keep_t_aging", "nan", "must be a number"),
    ("keep_t_aging", "11", "from 0.0 to 10.0"),
])
def test_parse_rejects_bad_url_text(key, raw, message):
    with pytest.raises(ValueError, match=message):
        BY[key].parse(raw)


def test_check_json_values():
    assert BY["keep_t_budget"].check(16.0) == 16  # JSON may write a whole number as 16.0
    assert BY["keep_t_aging"].check(1) == 1.0
    for key, bad in [("keep_t_budget", True), ("keep_t_budget", "8"), ("keep_t_prefix", 1),
                     ("keep_t_scenario", 3), ("keep_t_budget", None)]:
        with pytest.raises(ValueError):
            BY[key].check(bad)
    assert BY["keep_t_step"].check(None) is None  # optional


def test_url_params_and_from_url_round_trip():
    values = {"keep_t_scenario": "random_500", "keep_t_budget": 64, "keep_t_prefix": True,
              "keep_t_aging": 0.25, "keep_t_step": None}
    params = url_params(S, values)
    assert params == {"t_scenario": "random_500", "t_budget": "64", "t_prefix": "true", "t_aging": "0.25"}
    back, problems = from_url(S, {**params, "other_page": "x"})
    assert problems == [] and back == {k: v for k, v in values.items() if v is not None}
    back, problems = from_url(S, {"t_budget": ["1", "5"], "t_prefix": "perhaps"})
    assert back == {"keep_t_budget": 5} and len(problems) == 1 and "t_prefix" in problems[0]


def test_settings_file_round_trip():
    values = {s.key: s.default for s in S} | {"keep_t_budget": 99, "keep_t_step": 4}
    data = settings_json("t", S, values)
    doc = json.loads(data)
    assert doc["format"] == FORMAT and doc["page"] == "t" and doc["settings"]["t_budget"] == 99
    assert parse_settings_json(data, "t", S) == values


@pytest.mark.parametrize("data,message", [
    (b"\xff\xfe", "not UTF-8"),
    (b"{oops", "not valid JSON"),
    (b'{"page": "t", "settings": {}}', "not a settings file"),
    (json.dumps({"format": FORMAT, "page": "other", "settings": {}}).encode(), "'other' page"),
    (json.dumps({"format": FORMAT, "page": "t", "settings": {"t_bogus": 1}}).encode(), "unknown settings: t_bogus"),
    (json.dumps({"format": FORMAT, "page": "t", "settings": {"t_budget": 5000}}).encode(), "from 1 to 1,000"),
    (b" " * (65 * 1024), "at most 64 KB"),
])
def test_bad_settings_files(data, message):
    with pytest.raises(ValueError, match=message):
        parse_settings_json(data, "t", S)
