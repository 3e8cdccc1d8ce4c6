"""The Playback page under Streamlit's AppTest: run, change settings, scrub, upload."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from plotly_util import chart_specs, decode
from sim import scenarios
from sim.workload import Workload

APP = str(Path(__file__).resolve().parents[1] / "app.py")
LESSON_JSON = scenarios.workload("lesson_abc").dumps().encode()
IDX = {"A": 0, "B": 1, "C": 2}


@pytest.fixture
def at():
    a = AppTest.from_file(APP, default_timeout=60)
    a.run()
    assert not a.exception, a.exception
    return a


def lanes(at) -> np.ndarray:
    return decode(chart_specs(at)["occupancy"]["data"][0]["z"])


def table_with(at, column: str):
    """The dataframe that has this column (AppTest exposes no keys for st.dataframe)."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def batch_rows(at) -> list[list]:
    return table_with(at, "computed before")[["request", "kind", "tokens"]].values.tolist()


def test_default_page_shows_the_lesson_run(at):
    specs = chart_specs(at)
    assert {"occupancy", "step_tokens", "kv_map"} <= set(specs)
    assert lanes(at).shape == (3, 7)
    assert len(specs["occupancy"]["frames"]) == 7
    assert at.metric[0].label == "Steps" and at.metric[0].value == "7"
    assert any(m.label == "Preemptions" and m.value == "1" for m in at.metric)
    assert "mini vLLM loop" in " ".join(md.value for md in at.markdown)
    # the scrubber opens on the step with the fewest free blocks: step 3, KV full
    assert at.slider(key="keep_pb_step").value == 3
    assert specs["kv_map"]["layout"]["meta"]["free"] == 0
    assert not at.error


def test_max_sequences_changes_the_lanes(at):
    at.number_input(key="keep_pb_max_seqs").set_value(1).run()
    assert not at.exception
    z = lanes(at)
    assert z.shape[0] == 1  # one slot: requests run one after another
    assert [v for v in dict.fromkeys(z[0].tolist()) if v >= 0] == [0, 1, 2]


def test_policy_changes_who_runs_first(at):
    assert lanes(at)[0, 0] == IDX["A"]
    at.selectbox(key="keep_pb_policy").set_value("spf").run()  # shortest prompt first: C (5 tokens)
    assert not at.exception
    assert lanes(at)[0, 0] == IDX["C"]


def test_scrubbing_changes_the_inspector(at):
    assert batch_rows(at) == [["A", "decode", 1], ["B", "decode", 1], ["C", "prefill", 5]]
    at.slider(key="keep_pb_step").set_value(6).run()
    assert not at.exception
    assert batch_rows(at) == [["B", "decode", 1], ["C", "recompute", 7]]
    assert chart_specs(at)["kv_map"]["layout"]["meta"]["step"] == 6
    events = table_with(at, "event")
    assert ["C", "resume"] in events[["request", "event"]].values.tolist()
    at.button(key="pb_next").click().run()
    assert at.slider(key="keep_pb_step").value == 7
    assert batch_rows(at) == [["B", "decode", 1]]
    at.button(key="pb_next").click().run()  # already at the last step: stays
    assert at.slider(key="keep_pb_step").value == 7
    at.button(key="pb_prev").click().run()
    assert at.slider(key="keep_pb_step").value == 6


def test_choosing_a_scenario_loads_its_settings(at):
    at.selectbox(key="keep_pb_scenario").set_value("preemption_pressure").run()
    assert not at.exception
    assert at.number_input(key="keep_pb_blocks").value == 31
    assert at.number_input(key="keep_pb_block_size").value == 8
    assert lanes(at).shape[1] == 243


def test_upload_a_workload_runs_it(at):
    at.radio(key="keep_pb_source").set_value("Upload a workload JSON").run()
    assert not at.exception and not at.error
    assert "occupancy" not in chart_specs(at)  # nothing to show until a file comes
    wl = json.loads(LESSON_JSON)
    wl["config"]["max_num_seqs"] = 2
    at.file_uploader(key="pb_upload").upload("mine.workload.json", json.dumps(wl).encode(), "application/json")
    at.run()
    assert not at.exception and not at.error
    assert at.number_input(key="keep_pb_max_seqs").value == 2  # the file's config fills the settings
    assert lanes(at).shape[0] == 2
    assert "mine.workload.json" in " ".join(md.value for md in at.markdown)


@pytest.mark.parametrize("payload,message", [
    (b"\x00\xff\xfe garbage \x01", "not UTF-8"),
    (b"{not json", "not valid JSON"),
    (b"[1, 2, 3]", "'requests' list"),
    (b'{"requests": [{"id": "x"}]}', "has no prompt_len"),
    (b'{"requests": [{"id": "x", "prompt_len": 4, "max_tokens": 2}], "config": {"bogus": 1}}', "bogus"),
    (b'{"requests": [{"id": "x", "prompt_len": 4, "max_tokens": 2}], "config": {"policy": "nope"}}',
     "unknown policy"),
    (b'{"requests": [{"id": "x", "prompt_len": 4, "max_tokens": 2}], "config": {"max_num_seqs": 0}}',
     "max_num_seqs must be a whole number"),
    (b'{"requests": [{"id": "x", "prompt_len": 4, "max_tokens": 2}], "config": {"block_size": "big"}}',
     "block_size must be a whole number"),
    (b'{"requests": [{"id": "x", "prompt_len": "four", "max_tokens": 2}]}', "prompt_len of request x is 'four'"),
    (b'{"requests": []}', "no requests"),
])
def test_bad_upload_shows_an_error(at, payload, message):
    at.radio(key="keep_pb_source").set_value("Upload a workload JSON").run()
    at.file_uploader(key="pb_upload").upload("bad.json", payload, "application/json")
    at.run()
    assert not at.exception
    assert at.error and message in at.error[0].value, [e.value for e in at.error]
    assert "occupancy" not in chart_specs(at)


def test_a_config_that_cannot_run_is_an_error_not_a_crash(at):
    at.number_input(key="keep_pb_blocks").set_value(3).run()  # A needs 4 blocks of 4 tokens
    assert not at.exception
    assert at.error and "cannot run" in at.error[0].value


def test_static_scheduler_and_swap(at):
    at.selectbox(key="keep_pb_scheduler").set_value("static").run()
    assert not at.exception and not at.error
    at.selectbox(key="keep_pb_scheduler").set_value("vllm").run()
    at.radio(key="keep_pb_preemption").set_value("swap").run()
    assert not at.exception and not at.error
    ev = chart_specs(at)["occupancy"]
    assert ev["data"][0]["type"] == "heatmap"


def test_queue_limit_rejects_and_marks_arrivals(at):
    at.selectbox(key="keep_pb_scenario").set_value("preemption_pressure").run()
    specs = chart_specs(at)
    assert not any(t.get("name") == "rejected (queue full or SLO admission)" for t in specs["occupancy"]["data"])
    at.number_input(key="keep_pb_queue_limit").set_value(2).run()
    assert not at.exception, at.exception
    assert at.query_params["pb_queue_limit"] in ("2", ["2"])
    specs = chart_specs(at)
    marks = next(t for t in specs["occupancy"]["data"] if t.get("name") == "rejected (queue full or SLO admission)")
    from sim.simulate import simulate
    tr = simulate(scenarios.workload("preemption_pressure"), {"max_queued_requests": 2})
    rejected = tr.events[tr.events["kind"] == "reject"]
    assert sum(int(c[0]) for c in marks["customdata"]) == len(rejected) == 11
    assert any(t.get("name") == "rejected (queue full or SLO admission)" for t in specs["step_tokens"]["data"])
    assert any("turned away because the queue was full" in c.value for c in at.caption)


def test_async_scheduling_and_the_version_are_settings_the_page_shows(at):
    from sim.simulate import simulate
    assert any(c.value == "Scheduling: vLLM 0.34 rules · sync scheduling." for c in at.caption)
    at.toggle(key="keep_pb_async").set_value(True).run()
    assert not at.exception and not at.error
    assert at.query_params["pb_async"] in ("true", ["true"])
    assert any(c.value.startswith("Scheduling: vLLM 0.34 rules · async scheduling") for c in at.caption)
    want = simulate(scenarios.workload("lesson_abc"), {"async_scheduling": True})
    assert at.metric[0].value == str(len(want.steps)) == "8"   # one step more than sync's 7: the drain
    assert lanes(at).shape[1] == 8
    # a link carries both settings: 0.32's rules, async
    link = AppTest.from_file(APP, default_timeout=60)
    link.query_params["pb_vllm_version"], link.query_params["pb_async"] = "0.32", "true"
    link.run()
    assert not link.exception and not link.error
    assert link.selectbox(key="keep_pb_vllm_version").value == "0.32" and link.toggle(key="keep_pb_async").value
    assert any(c.value.startswith("Scheduling: vLLM 0.32 rules · async scheduling") for c in link.caption)


def test_an_uploaded_async_workload_sets_the_mode(at):
    wl = scenarios.workload("lesson_abc")
    data = Workload(wl.requests, {**wl.config, "async_scheduling": True, "vllm_version": "0.34.0"}).dumps().encode()
    at.radio(key="keep_pb_source").set_value("Upload a workload JSON").run()
    at.file_uploader(key="pb_upload").upload("async.workload.json", data, "application/json").run()
    assert not at.exception and not at.error
    assert at.toggle(key="keep_pb_async").value and at.selectbox(key="keep_pb_vllm_version").value == "0.34"
    assert at.metric[0].value == "8"
    at.selectbox(key="keep_pb_scheduler").set_value("static").run()   # static batching has no async mode
    assert not at.exception
    assert at.error and "the static scheduler has no async mode" in at.error[0].value


def test_an_uploaded_workload_of_an_unchecked_vllm_runs_under_the_nearest_rules_and_says_so(at):
    """A workload naming vLLM 0.36.2: the version box holds 0.34 (the nearest checked), a caption
    under it says whose rules run, and it goes once another version is picked."""
    wl = scenarios.workload("lesson_abc")
    data = Workload(wl.requests, {**wl.config, "vllm_version": "0.36.2"}).dumps().encode()
    at.radio(key="keep_pb_source").set_value("Upload a workload JSON").run()
    at.file_uploader(key="pb_upload").upload("newer.workload.json", data, "application/json").run()
    assert not at.exception and not at.error
    assert at.selectbox(key="keep_pb_vllm_version").value == "0.34"
    shown = [re.sub(r"\\(.)", r"\1", c.value) for c in at.caption]   # as rendered (plain() escapes markdown)
    said = [c for c in shown if "0.36.2" in c]
    assert len(said) == 1 and "follows 0.34's rules" in said[0]
    at.selectbox(key="keep_pb_vllm_version").set_value("0.33").run()
    assert not at.exception and not any("0.36.2" in re.sub(r"\\(.)", r"\1", c.value) for c in at.caption)


def test_a_vllm_0_9_1_workload_runs_under_0_9_0_rules_and_async_is_refused_in_one_sentence(at):
    """vLLM 0.9.1 has the rules of 0.9.0 and 0.9.1: the version box holds them, named so, and nothing
    borrowed is said; 0.9.1 has no async scheduling, so turning it on is one plain sentence."""
    wl = scenarios.workload("lesson_abc")
    data = Workload(wl.requests, {**wl.config, "vllm_version": "0.9.1"}).dumps().encode()
    at.radio(key="keep_pb_source").set_value("Upload a workload JSON").run()
    at.file_uploader(key="pb_upload").upload("old.workload.json", data, "application/json").run()
    assert not at.exception and not at.error
    assert at.selectbox(key="keep_pb_vllm_version").value == "0.9.0"
    assert any(c.value.startswith("Scheduling: vLLM 0.9.0-0.9.1 rules · sync scheduling") for c in at.caption)
    assert not any("decides as" in c.value for c in at.caption)
    at.toggle(key="keep_pb_async").set_value(True).run()
    assert not at.exception
    assert at.error and "async_scheduling is modelled on vLLM 0.10 to 0.34" in at.error[0].value


def test_a_vllm_0_8_2_workload_runs_under_its_own_rules_and_a_link_keeps_0_8_3(at):
    """vLLM 0.8.0-0.8.2 and 0.8.3-0.8.4 have rules of their own (preallocated blocks; before 0.8.3 no
    null block): the box holds them, named by the releases they cover, and says nothing borrowed."""
    wl = scenarios.workload("lesson_abc")
    data = Workload(wl.requests, {**wl.config, "vllm_version": "0.8.2"}).dumps().encode()
    at.radio(key="keep_pb_source").set_value("Upload a workload JSON").run()
    at.file_uploader(key="pb_upload").upload("old.workload.json", data, "application/json").run()
    assert not at.exception and not at.error
    assert at.selectbox(key="keep_pb_vllm_version").value == "0.8.0"
    assert any(c.value.startswith("Scheduling: vLLM 0.8.0-0.8.2 rules · sync scheduling") for c in at.caption)
    assert not any("decides as" in c.value for c in at.caption)
    link = AppTest.from_file(APP, default_timeout=60)
    link.query_params["pb_vllm_version"] = "0.8.3"
    link.run()
    assert not link.exception and not link.error
    assert link.selectbox(key="keep_pb_vllm_version").value == "0.8.3"
    assert any(c.value.startswith("Scheduling: vLLM 0.8.3-0.8.4 rules") for c in link.caption)


def test_the_gpu_preset_gives_a_default_vllm_034_gpu_deployment(at):
    """"vLLM 0.34 on a GPU": async on, 64-token blocks recounted to hold the same tokens, the vLLM
    scheduler with recompute; the run is the simulator's on that config."""
    from sim.simulate import simulate
    from sim.versions import gpu_blocks
    at.radio(key="keep_pb_preemption").set_value("swap").run()
    blocks, size = at.number_input(key="keep_pb_blocks").value, at.number_input(key="keep_pb_block_size").value
    at.button(key="pb_gpu_preset").click().run()
    assert not at.exception and not at.error
    assert at.toggle(key="keep_pb_async").value and at.selectbox(key="keep_pb_vllm_version").value == "0.34"
    assert at.radio(key="keep_pb_preemption").value == "recompute"
    assert at.number_input(key="keep_pb_block_size").value == 64
    assert at.number_input(key="keep_pb_blocks").value == gpu_blocks(blocks, size) < blocks
    assert at.query_params["pb_block_size"] in ("64", ["64"])
    assert any(c.value.startswith("Scheduling: vLLM 0.34 rules · async scheduling") for c in at.caption)
    wl = scenarios.workload("lesson_abc")
    want = simulate(wl, {"async_scheduling": True, "block_size": 64, "num_gpu_blocks": gpu_blocks(blocks, size)})
    assert at.metric[0].value == str(len(want.steps))
