"""Windowed playback under AppTest: a long run opens on its overview, a window comes from the
link or the number inputs, and the detailed views draw only the window (ui/window.py)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from app_util import open_page
from plotly_util import chart_specs, decode
from ui.window import DEFAULT_SPAN, LONG_RUN_STEPS

SOAK = Path(__file__).resolve().parent / "fixtures" / "llama-logs" / "34af94cd9" / "s8_soak.log.gz"


def long_workload(n: int = 600) -> bytes:
    """n requests, one every 10 steps into 4 slots and a small KV pool: a busy run of ~10n steps."""
    reqs = [{"id": f"r{i}", "arrival_step": 10 * i, "prompt_len": 40 + 8 * (i % 5), "max_tokens": 20 + (i * 7) % 30,
             "prompt_seed": i % 3} for i in range(n)]
    return json.dumps({"config": {"max_num_seqs": 4, "max_num_batched_tokens": 64, "num_gpu_blocks": 24,
                                  "block_size": 16, "enable_prefix_caching": True}, "requests": reqs}).encode()


def lane_steps(at) -> np.ndarray:
    return decode(chart_specs(at)["occupancy"]["data"][0]["x"])


def upload_long(at):
    at.radio(key="keep_pb_source").set_value("Upload a workload JSON").run()
    at.file_uploader(key="pb_upload").upload("long.workload.json", long_workload(), "application/json")
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    return at


@pytest.fixture(scope="module")
def long_run():
    return upload_long(open_page("playback.py"))


def test_a_long_run_opens_on_its_overview_and_the_lanes_draw_only_the_window(long_run):
    at = long_run
    steps = int(at.metric[0].value.replace(",", ""))
    assert steps > LONG_RUN_STEPS
    specs = chart_specs(at)
    ov = specs["pb_overview"]
    assert ov["layout"]["meta"]["buckets"] >= 1000 and ov["layout"]["dragmode"] == "select"
    x = lane_steps(at)
    assert len(x) == DEFAULT_SPAN and np.array_equal(x, np.arange(x[0], x[0] + DEFAULT_SPAN))   # every step
    first, last = map(int, at.query_params["pb_win"].split("-"))
    assert (first, last) == (int(x[0]), int(x[-1]))
    assert ov["layout"]["shapes"][0]["x0"] == first and ov["layout"]["shapes"][0]["x1"] == last + 1
    # the tokens per step and the inspector follow the window
    assert decode(specs["step_tokens"]["data"][0]["x"]).max() <= last
    sl = at.slider(key="keep_pb_step")
    assert sl.min == first and sl.max == last
    assert "whole run" in " ".join(c.value for c in at.caption)


def test_typing_a_window_redraws_the_lanes_and_goes_in_the_link(long_run):
    at = long_run
    at.number_input(key="pb_win_first").set_value(2000).run()
    at.number_input(key="pb_win_last").set_value(2600).run()
    assert not at.exception
    x = lane_steps(at)
    assert (int(x[0]), int(x[-1]), len(x)) == (2000, 2600, 601)
    assert at.query_params["pb_win"] == "2000-2600"
    kv = chart_specs(at)["kv_map"]["layout"]["meta"]
    assert 2000 <= kv["step"] <= 2600


def test_whole_run_and_last_n(long_run):
    at = long_run
    at.button(key="pb_win_all").click().run()
    x = lane_steps(at)
    steps = int(at.metric[0].value.replace(",", ""))
    assert at.query_params["pb_win"] == "all" and x[-1] == steps and len(x) < steps   # strided past 5,000
    at.button(key="pb_win_last_n").click().run()
    x = lane_steps(at)
    assert at.query_params["pb_win"] == f"last{DEFAULT_SPAN}" and x[-1] == steps and len(x) == DEFAULT_SPAN


def test_a_window_in_the_link_is_honoured_even_on_a_short_run():
    at = open_page("playback.py", pb_scenario="random_500", pb_win="100-300")
    assert not at.error
    x = lane_steps(at)
    assert (int(x[0]), int(x[-1]), len(x)) == (100, 300, 201)
    assert "pb_overview" in chart_specs(at) and at.query_params["pb_win"] == "100-300"


def test_a_short_run_has_no_overview():
    at = open_page("playback.py", pb_scenario="random_500")
    specs = chart_specs(at)
    assert "pb_overview" not in specs and "pb_win" not in at.query_params
    assert len(decode(specs["occupancy"]["data"][0]["x"])) == int(at.metric[0].value.replace(",", ""))


def test_a_bad_window_in_the_link_is_ignored_with_one_sentence():
    at = open_page("playback.py", pb_scenario="random_500", pb_win="lots")
    assert not at.exception and not at.error
    warn = [w.value for w in at.warning]
    assert any("Ignored the window in the link" in w and len(w) <= 200 for w in warn), warn
    assert "pb_overview" not in chart_specs(at)


def test_a_run_past_the_old_step_cap_plays_on_its_overview():
    """The 200,000-step cap is gone: 300,000 idle steps, then one request, run and open on the overview."""
    at = open_page("playback.py")
    at.radio(key="keep_pb_source").set_value("Upload a workload JSON").run()
    far = b'{"requests": [{"id": "x", "prompt_len": 4, "max_tokens": 2, "arrival_step": 300000}]}'
    at.file_uploader(key="pb_upload").upload("far.json", far, "application/json")
    at.run()
    assert not at.exception and not at.error
    assert int(at.metric[0].value.replace(",", "")) > 300_000
    x = lane_steps(at)
    assert len(x) == DEFAULT_SPAN and x[-1] >= 300_000   # the window opens on the busy step


def test_the_llama_log_page_takes_a_window_from_the_link():
    at = open_page("llama_log.py", 60, ll_win="100-400")
    assert not at.exception and not at.error
    specs = chart_specs(at)
    assert "ll_overview" in specs
    sl = at.slider(key="keep_ll_step")
    assert (sl.min, sl.max) == (100, 400)
    assert at.query_params["ll_win"] == "100-400"


def test_a_long_real_llama_server_log_opens_on_its_overview():
    """The soak log: 11,419 model calls of a real llama-server, more than a window."""
    at = open_page("llama_log.py", 120)
    at.sidebar.file_uploader[0].upload(SOAK.name, SOAK.read_bytes(), "application/gzip").run()
    assert not at.exception and not at.error
    calls = int(next(m.value for m in at.metric if m.label == "Model calls").replace(",", ""))
    assert calls > LONG_RUN_STEPS
    specs = chart_specs(at)
    assert "ll_overview" in specs
    first, last = map(int, at.query_params["ll_win"].split("-"))
    sl = at.slider(key="keep_ll_step")
    assert (sl.min, sl.max) == (first, last) and last - first + 1 == DEFAULT_SPAN
    at.button(key="ll_win_last_n").click().run()
    sl = at.slider(key="keep_ll_step")
    assert sl.max == calls and sl.min == calls - DEFAULT_SPAN + 1 and at.query_params["ll_win"] == f"last{DEFAULT_SPAN}"


def test_the_server_log_page_takes_a_window_from_the_link():
    at = open_page("server_log.py", 60, sl_win="3-9")
    assert not at.exception and not at.error
    assert "sl_overview" in chart_specs(at) and at.query_params["sl_win"] == "3-9"


def test_the_fleet_page_takes_a_time_span_from_the_link():
    at = open_page("fleet.py", 180, fleet_ab="false", fleet_span="2000-6000")
    assert not at.exception and not at.error
    specs = chart_specs(at)
    assert specs["fleet_overview"]["layout"]["meta"]["replicas"] >= 2
    win = specs["fleet_lanes"]["layout"]["meta"]["window"]
    assert win[0] >= 2000 and win[1] <= 6000
    assert 2000 <= int(at.query_params["fleet_t"]) <= 6000


def test_compare_cuts_both_runs_to_one_window_picked_on_the_longer_runs_overview():
    at = open_page("compare.py")
    at.radio(key="keep_cmp_source").set_value("Upload a workload JSON").run()
    at.file_uploader(key="cmp_upload").upload("long.workload.json", long_workload(), "application/json")
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    specs = chart_specs(at)
    assert "cmp_overview" in specs
    first, last = map(int, at.query_params["cmp_win"].split("-"))
    assert last - first + 1 == DEFAULT_SPAN
    meta = specs["lockstep"]["layout"]["meta"]
    assert max(meta["last_step"]) <= last           # neither side's lanes go past the window
    at.number_input(key="cmp_win_first").set_value(3000).run()
    at.number_input(key="cmp_win_last").set_value(3400).run()
    assert not at.exception and at.query_params["cmp_win"] == "3000-3400"
    sl = at.slider(key="keep_cmp_step")
    assert (sl.min, sl.max) == (3000, 3400)
    assert max(chart_specs(at)["lockstep"]["layout"]["meta"]["last_step"]) == 3400
    # the headline numbers stay the whole runs': B (twice the blocks) ends no later than A's run
    steps = [m.value for m in at.metric if m.label == "Steps"][0]
    a_steps = int(steps.split("→")[0].strip().replace(",", ""))
    assert a_steps > LONG_RUN_STEPS
