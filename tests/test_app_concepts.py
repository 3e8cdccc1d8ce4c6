"""The concept pages under AppTest: "Why batch" (Example 1), "Static vs continuous batching"
(Examples 2 and 3) and "Prefill interference and chunked prefill" (Examples 4 and 5). Each
default run reproduces the lesson's figures; changing a control changes the figure data."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from plotly_util import chart_specs, decode

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def page(path: str, **params) -> AppTest:
    """The app opened straight on `path` (a link with these query parameters)."""
    at = AppTest.from_file(APP, default_timeout=90)
    for k, v in params.items():
        at.query_params[k] = v
    at.switch_page(path).run()
    assert not at.exception, at.exception
    return at


def metric_map(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


# -----------------------------------------------------------------------------------------------
# Why batch
# -----------------------------------------------------------------------------------------------

def trace(at, name: str) -> dict:
    return next(t for t in chart_specs(at)["wb_decode"]["data"] if t["name"] == name)


def test_default_is_the_lessons_rtx4090_8b_table():
    at = page("pages/why_batch.py")
    metrics = metric_map(at)
    assert metrics == {"1 sequence": "199.5 tok/s", "FLOP utilisation, batch 1": "1.94%",
                       "Batch 32": "1,487 tok/s", "Sequences that fit": "36"}
    table = at.dataframe[0].value
    assert table["batch"].tolist() == [1, 8, 16, 32]
    assert table["tok/s total"].tolist() == [199, 915, 1231, 1487]
    assert table["tok/s per seq"].tolist() == [199.5, 114.4, 76.9, 46.5]
    assert table["FLOP utilisation (%)"].tolist() == [1.94, 8.9, 11.96, 14.45]
    assert table["KV cache (GB)"].tolist()[-1] == 17.18 and table["bytes/step (GB)"].tolist()[-1] == 21.7
    fig = chart_specs(at)["wb_decode"]
    assert fig["layout"]["meta"]["fit_sequences"] == 36
    assert decode(trace(at, "step time")["x"]).tolist() == list(range(1, 49))
    text = " ".join(md.value for md in at.markdown)
    assert "199.5 tokens/s" in text and "1.94%" in text and "1,487 tokens/s" in text and "36 sequences" in text
    assert "batch 9" in text  # where the KV cache outweighs the weights
    assert at.query_params["wb_hardware"] == "rtx4090"
    assert not at.error and not at.warning


def test_gpu_model_context_and_range_change_the_figure():
    at = page("pages/why_batch.py")
    before = decode(trace(at, "step time")["y"])
    at.selectbox(key="keep_wb_hardware").set_value("h100-sxm").run()
    assert not at.exception
    after = decode(trace(at, "step time")["y"])
    assert np.all(after < before / 3)  # 3.35 TB/s instead of 1,008 GB/s
    assert chart_specs(at)["wb_decode"]["layout"]["meta"]["fit_sequences"] == 140  # 80 GB
    assert at.query_params["wb_hardware"] == "h100-sxm"
    at.selectbox(key="keep_wb_model").set_value("8B-fp16").run()
    assert decode(trace(at, "weights (read once per step)")["y"])[0] > 16  # 8B at 16 bits = 16.06 GB
    at.selectbox(key="keep_wb_hardware").set_value("rtx4090").run()
    at.selectbox(key="keep_wb_model").set_value("8B").run()
    assert chart_specs(at)["wb_decode"]["layout"]["meta"]["compute_bound_batch"] is None
    at.number_input(key="keep_wb_context").set_value(512).run()
    meta = chart_specs(at)["wb_decode"]["layout"]["meta"]
    assert meta["compute_bound_batch"] == 147  # short contexts: the arithmetic catches up
    at.number_input(key="keep_wb_bmin").set_value(8).run()
    at.number_input(key="keep_wb_bmax").set_value(64).run()
    assert decode(trace(at, "step time")["x"]).tolist() == list(range(8, 65))
    assert len(chart_specs(at)["wb_decode"]["frames"]) == 57


def test_a_link_restores_the_settings():
    at = page("pages/why_batch.py", wb_hardware="a100-80gb-sxm", wb_context="8192", wb_bmax="16")
    assert at.selectbox(key="keep_wb_hardware").value == "a100-80gb-sxm"
    assert at.number_input(key="keep_wb_context").value == 8192
    assert decode(trace(at, "step time")["x"]).tolist()[-1] == 16


# -----------------------------------------------------------------------------------------------
# Static vs continuous batching
# -----------------------------------------------------------------------------------------------

def metric_pairs(at) -> list[tuple[str, str]]:
    return [(m.label, m.value) for m in at.metric]


def returns(at) -> list[list[float]]:
    lanes = chart_specs(at)["sb_lanes"]
    return [sorted(decode(t["x"]).tolist()) for t in lanes["data"] if t["name"] == "result returned"]


def test_default_reproduces_examples_2_and_3():
    at = page("pages/batching.py")
    assert metric_pairs(at) == [("Steps", "35"), ("Useful slot-steps", "53%"), ("Mean finish step", "27.5"),
                           ("Steps", "27"), ("Useful slot-steps", "69%"), ("Mean finish step", "13.125")]
    lanes = chart_specs(at)["sb_lanes"]
    heat = [t for t in lanes["data"] if t["name"] == "slot lanes"]
    assert [decode(t["z"]).shape for t in heat] == [(4, 35), (4, 27)]
    assert len(lanes["frames"]) == 35 and lanes["layout"]["meta"]["last_step"] == [35, 27]
    static_ret, cont_ret = returns(at)
    assert static_ret == [20.5] * 4 + [35.5] * 4
    assert cont_ret == sorted(f + 0.5 for f in [12, 3, 7, 20, 8, 16, 12, 27])
    finish = chart_specs(at)["sb_finish"]["data"]
    assert list(finish[0]["y"]) == [20, 20, 20, 20, 35, 35, 35, 35]
    assert list(finish[1]["y"]) == [12, 3, 7, 20, 8, 16, 12, 27]
    table = at.dataframe[0].value.set_index("")
    assert table.loc["padding slot-steps"].tolist() == ["65", "0"]
    assert table.loc["steps a waiting request joined", "continuous"] == "1, 4, 8, 9, 13"
    text = " ".join(md.value for md in at.markdown)
    assert "only 3 tokens, yet its result returns at step **20**" in text
    assert len(at.get("download_button")) == 6 + 1  # two export panels + the settings file
    assert not at.error


def test_slots_outputs_and_arrivals_change_the_runs():
    at = page("pages/batching.py")
    at.number_input(key="keep_sb_slots").set_value(8).run()  # one group of all 8: both take 20 steps
    assert not at.exception
    assert [v for k, v in metric_pairs(at) if k == "Steps"] == ["20", "20"]
    assert at.query_params["sb_slots"] == "8"
    at.number_input(key="keep_sb_slots").set_value(2).run()
    at.text_input(key="keep_sb_outputs").input("5, 1, 1, 5").run()
    heat = [t for t in chart_specs(at)["sb_lanes"]["data"] if t["name"] == "slot lanes"]
    assert [decode(t["z"]).shape for t in heat] == [(2, 10), (2, 7)]
    at.text_input(key="keep_sb_arrivals").input("0, 0, 6, 6").run()
    assert not at.exception
    static_ret, cont_ret = returns(at)
    assert static_ret == [5.5, 5.5, 11.5, 11.5]  # the second group forms when r2, r3 arrive before step 7
    assert cont_ret == [1.5, 5.5, 7.5, 11.5]  # r1 done in step 1; r2, r3 join before step 7
    assert "mean latency" in " ".join(c.value for c in at.caption)


def test_bad_input_is_an_error_message_not_a_crash():
    at = page("pages/batching.py")
    at.text_input(key="keep_sb_outputs").input("12, three").run()
    assert not at.exception
    assert "output lengths must be whole numbers" in at.error[0].value
    at.text_input(key="keep_sb_outputs").input("1, 2").run()
    at.text_input(key="keep_sb_arrivals").input("0").run()
    assert "1 arrival steps for 2 requests" in at.error[0].value


def test_a_link_restores_the_requests():
    at = page("pages/batching.py", sb_outputs="4,4", sb_slots="1")
    assert [v for k, v in metric_pairs(at) if k == "Steps"] == ["8", "8"]


# -----------------------------------------------------------------------------------------------
# Prefill interference and chunked prefill
# -----------------------------------------------------------------------------------------------

def gaps(at) -> list[float]:
    fig = chart_specs(at)["pf_timeline"]
    return decode(next(t for t in fig["data"] if t["name"] == "decoders' wait for a token")["y"]).tolist()


def test_default_is_example_4_and_the_example_5_table():
    at = page("pages/chunked_prefill.py")
    assert metric_map(at) == {"Decoders' usual gap": "10.00 units", "Worst decoder gap": "80.08 units",
                           "Long request's first token": "80.08 units", "Prompt steps": "1"}
    assert gaps(at) == pytest.approx([10, 10, 10, 80.08, 10, 10, 10])
    assert len(chart_specs(at)["pf_timeline"]["frames"]) == 7
    table = at.dataframe[0].value.set_index("budget")
    rows = {b: (table.loc[b, "prompt steps"], table.loc[b, "first token (units)"], table.loc[b, "worst decoder gap (units)"])
            for b in (4004, 2048, 512, 256)}
    assert rows == {4004: (1, 80.08, 80.08), 2048: (2, 80.16, 40.96), 512: (8, 81.68, 10.24), 256: (16, 160.0, 10.0)}
    assert table.loc[504, ""] == "sweet spot"
    budgets = chart_specs(at)["pf_budgets"]
    assert budgets["layout"]["meta"]["sweet_spot"]["budget"] == 504
    assert budgets["layout"]["meta"]["chosen"] == 4004
    text = " ".join(md.value for md in at.markdown)
    assert "**80.08 units**" in text and "**504**" in text
    assert not at.error


def test_budget_slider_chunks_the_prompt():
    at = page("pages/chunked_prefill.py")
    at.slider(key="keep_pf_budget").set_value(512).run()
    assert not at.exception
    assert metric_map(at)["Worst decoder gap"] == "10.24 units"
    assert metric_map(at)["Long request's first token"] == "81.68 units"
    assert metric_map(at)["Prompt steps"] == "8"
    fig = chart_specs(at)["pf_timeline"]
    assert len(decode(next(t for t in fig["data"] if t["name"] == "prompt chunk")["x"])) == 8
    assert max(gaps(at)) == pytest.approx(10.24)
    assert chart_specs(at)["pf_budgets"]["layout"]["meta"]["chosen"] == 512
    assert at.query_params["pf_budget"] == "512"


def test_roofline_preset_and_decoders():
    at = page("pages/chunked_prefill.py", pf_budget="2048")
    assert metric_map(at)["Worst decoder gap"] == "40.96 units"
    at.selectbox(key="keep_pf_cost").set_value("rtx4090-8B").run()
    assert not at.exception
    m = metric_map(at)
    assert m["Decoders' usual gap"].endswith(" ms") and m["Prompt steps"] == "2"
    assert chart_specs(at)["pf_budgets"]["layout"]["meta"]["sweet_spot"]["budget"] < 512  # small chunks pay off on a 4090
    at.number_input(key="keep_pf_decoders").set_value(8).run()
    fig = chart_specs(at)["pf_timeline"]
    assert fig["layout"]["meta"]["lanes"] == ["long prompt"] + [f"d{i}" for i in range(8)]


def test_budget_out_of_range_is_clamped():
    at = page("pages/chunked_prefill.py", pf_prompt="100", pf_budget="4004")
    assert at.slider(key="keep_pf_budget").value == 104
    assert metric_map(at)["Prompt steps"] == "1"
