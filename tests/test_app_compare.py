"""The Compare page under Streamlit's AppTest: both runs, the B-side controls, the one scrubber."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from plotly_util import chart_specs, decode

APP = str(Path(__file__).resolve().parents[1] / "app.py")
IDX = {"A": 0, "B": 1, "C": 2}


def open_compare(**params) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    at.switch_page("pages/compare.py").run()
    assert not at.exception, at.exception
    return at


@pytest.fixture
def at():
    return open_compare()


def lanes(at, side: str) -> np.ndarray:
    spec = chart_specs(at)["lockstep"]
    axis = {"a": "y", "b": "y2"}[side]
    return decode(next(t for t in spec["data"] if t["type"] == "heatmap" and t["yaxis"] == axis)["z"])


def diff(at):
    return next(d.value for d in at.dataframe if "better" in d.value.columns).set_index("metric")


def batch(at, side: str) -> list[list]:
    tables = [d.value for d in at.dataframe if "computed before" in d.value.columns]
    return tables[{"a": 0, "b": 1}[side]][["request", "kind", "tokens"]].values.tolist()


def test_default_compares_the_lesson_with_twice_the_blocks(at):
    assert not at.error
    assert at.title[0].value == "Compare"
    assert at.number_input(key="keep_cmp_a_blocks").value == 8
    assert at.number_input(key="keep_cmp_b_blocks").value == 16
    specs = chart_specs(at)
    assert {"lockstep", "kv_a", "kv_b", "change"} <= set(specs)
    assert specs["lockstep"]["layout"]["meta"]["last_step"] == [7, 7]
    assert lanes(at, "a")[2, 4] == -1 and lanes(at, "b")[2, 4] == IDX["C"]  # C preempted only in A
    d = diff(at)
    assert d.loc["preemptions", "A"] == 1 and d.loc["preemptions", "B"] == 0
    assert d.loc["preemptions", "better"] == "B"
    assert any(m.label == "Preemptions" and m.value == "1 → 0" for m in at.metric)
    change = specs["change"]["layout"]["meta"]
    assert (change["faster"], change["slower"], change["same"]) == (1, 0, 2)  # C finishes 10 units sooner
    assert at.slider(key="keep_cmp_step").value == 5  # opens where A and B first differ
    assert at.query_params["cmp_b_blocks"] == "16"


def test_changing_b_budget_changes_b_and_the_differences(at):
    before_a, before_b = lanes(at, "a"), lanes(at, "b")
    steps_before = diff(at).loc["steps", "B"]
    at.number_input(key="keep_cmp_b_budget").set_value(16).run()
    assert not at.exception and not at.error
    assert np.array_equal(lanes(at, "a"), before_a)  # A untouched
    after_b = lanes(at, "b")
    assert after_b.shape != before_b.shape or not np.array_equal(after_b, before_b)
    assert after_b[0, 0] == IDX["A"] and after_b[1, 0] == IDX["B"]  # 16 tokens: A and B both start at step 1
    d = diff(at)
    assert d.loc["steps", "B"] < steps_before and d.loc["steps", "better"] == "B"
    assert chart_specs(at)["lockstep"]["layout"]["meta"]["last_step"][1] == d.loc["steps", "B"]
    assert at.query_params["cmp_b_budget"] == "16"


def test_one_scrubber_moves_both_sides(at):
    at.slider(key="keep_cmp_step").set_value(6).run()
    assert not at.exception
    specs = chart_specs(at)
    assert specs["kv_a"]["layout"]["meta"]["step"] == 6 and specs["kv_b"]["layout"]["meta"]["step"] == 6
    assert batch(at, "a") == [["B", "decode", 1], ["C", "recompute", 7]]
    assert batch(at, "b") == [["B", "decode", 1]]  # with 16 blocks C was never preempted: done at step 5
    at.button(key="cmp_next").click().run()
    specs = chart_specs(at)
    assert specs["kv_a"]["layout"]["meta"]["step"] == 7 and specs["kv_b"]["layout"]["meta"]["step"] == 7
    assert at.query_params["cmp_step"] == "7"


def test_ttft_view_and_a_link_reproduce_a_comparison():
    at = open_compare()
    at.radio(key="keep_cmp_change").set_value("ttft").run()
    assert chart_specs(at)["change"]["layout"]["meta"]["metric"] == "ttft"
    # a fresh session opened on a link with B's settings gets them back
    link = dict(at.query_params) | {"cmp_b_budget": "16", "cmp_b_policy": "spf", "cmp_step": "2"}
    at2 = AppTest.from_file(APP, default_timeout=60)
    at2.run()
    for k, v in link.items():
        at2.query_params[k] = v
    at2.switch_page("pages/compare.py").run()
    assert not at2.exception and not at2.warning
    assert at2.number_input(key="keep_cmp_b_budget").value == 16
    assert at2.selectbox(key="keep_cmp_b_policy").value == "spf"
    assert at2.slider(key="keep_cmp_step").value == 2
    assert at2.radio(key="keep_cmp_change").value == "ttft"


def test_a_side_that_cannot_run_is_an_error_not_a_crash(at):
    at.number_input(key="keep_cmp_b_blocks").set_value(3).run()  # A needs 4 blocks of 4 tokens
    assert not at.exception
    assert at.error and "Configuration B cannot run" in at.error[0].value


def test_upload_runs_both_sides_on_the_uploaded_arrivals(at):
    from sim import scenarios
    at.radio(key="keep_cmp_source").set_value("Upload a workload JSON").run()
    assert not at.exception and "lockstep" not in chart_specs(at)
    wl = scenarios.workload("two_tenants").dumps().encode()
    at.file_uploader(key="cmp_upload").upload("tenants.workload.json", wl, "application/json").run()
    assert not at.exception and not at.error
    assert at.selectbox(key="keep_cmp_a_policy").value == "round_robin"
    assert lanes(at, "a").shape[0] == 4
    assert at.number_input(key="keep_cmp_b_blocks").value == 128


def test_a_queue_limit_on_one_side_rejects_there_only():
    at = open_compare(cmp_scenario="preemption_pressure")
    at.number_input(key="keep_cmp_b_queue").set_value(2).run()
    assert not at.exception, at.exception
    assert at.query_params["cmp_b_queue"] in ("2", ["2"])
    spec = chart_specs(at)["lockstep"]
    marks = [t for t in spec["data"] if t.get("name") == "rejected (queue full or SLO admission)"]
    assert [t["yaxis"] for t in marks] == ["y2"] and len(marks[0]["customdata"]) > 0
    assert any("queue ≤ 2" in a["text"] for a in spec["layout"]["annotations"])   # B's title says so
    rejected = next(m for m in at.metric if m.label == "Rejected (queue full or SLO)")
    n = sum(int(c[0]) for c in marks[0]["customdata"])   # the markers' counts
    assert rejected.value == f"0 → {n}" and n > 0
    assert any("looks faster for it" in c.value for c in at.caption)


def test_sync_vs_async_on_the_same_arrivals(at):
    """The button puts A sync and B async on otherwise the same config, with the usual figures
    and deltas, and the link holds it."""
    from sim import scenarios
    from sim.analysis import compare
    from sim.simulate import simulate
    assert any(c.value == "Scheduling: A vLLM 0.34 rules · sync scheduling; B vLLM 0.34 rules · sync scheduling."
               for c in at.caption)
    at.button(key="cmp_sync_async").click().run()
    assert not at.exception and not at.error
    assert at.number_input(key="keep_cmp_b_blocks").value == 8   # B = A: no longer twice the blocks
    assert at.toggle(key="keep_cmp_b_async").value and not at.toggle(key="keep_cmp_a_async").value
    assert at.query_params["cmp_b_async"] == "true" and at.query_params["cmp_a_async"] == "false"
    mode = next(c.value for c in at.caption if c.value.startswith("Scheduling:"))
    assert "A vLLM 0.34 rules · sync scheduling; B vLLM 0.34 rules · async scheduling" in mode
    wl = scenarios.workload("lesson_abc")
    metrics, _ = compare(simulate(wl, {}), simulate(wl, {"async_scheduling": True}))
    d = diff(at)
    want = metrics.set_index("metric")["B - A"]
    for key, row in (("steps", "steps"), ("e2e_mean", "end-to-end latency, mean"), ("itl_worst", "inter-token gap, worst")):
        assert d.loc[row, "B - A"] == pytest.approx(want[key])
    assert d.loc["steps", "B - A"] == 1 and d.loc["end-to-end latency, mean", "B - A"] > 0   # the drain; frees later
    assert any(m.label == "Steps" and m.value == "7 → 8" for m in at.metric)
    titles = [a["text"] for a in chart_specs(at)["lockstep"]["layout"]["annotations"]]
    assert titles[0].startswith("<b>A:") and titles[0].endswith("· vLLM 0.34 sync</b>")
    assert titles[1].startswith("<b>B:") and titles[1].endswith("· vLLM 0.34 async</b>")
    assert chart_specs(at)["lockstep"]["layout"]["meta"]["last_step"] == [7, 8]
    from app_util import open_page
    again = open_page("compare.py", 60, **dict(at.query_params))   # the link reproduces it
    assert again.toggle(key="keep_cmp_b_async").value and again.number_input(key="keep_cmp_b_blocks").value == 8
    assert not again.error and diff(again).loc["steps", "B - A"] == 1


def test_the_gpu_preset_on_one_side(at):
    """B's "vLLM 0.34 on a GPU": async, 64-token blocks holding B's tokens, recompute; A untouched."""
    from sim.versions import gpu_blocks
    blocks_b, size = at.number_input(key="keep_cmp_b_blocks").value, at.number_input(key="keep_cmp_b_block_size").value
    assert size == at.number_input(key="keep_cmp_a_block_size").value   # the workload's block size, on both sides
    at.button(key="cmp_b_gpu_preset").click().run()
    assert not at.exception and not at.error
    assert at.toggle(key="keep_cmp_b_async").value and not at.toggle(key="keep_cmp_a_async").value
    assert at.number_input(key="keep_cmp_b_block_size").value == 64 and at.number_input(key="keep_cmp_a_block_size").value == size
    assert at.number_input(key="keep_cmp_b_blocks").value == gpu_blocks(blocks_b, size)
    titles = [a["text"] for a in chart_specs(at)["lockstep"]["layout"]["annotations"]]
    assert "blocks of 64" in titles[1] and titles[1].endswith("· vLLM 0.34 async</b>")
    assert f"blocks of {size}" in titles[0]
