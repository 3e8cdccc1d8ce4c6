"""The Disaggregation page under AppTest: the lesson's Example 10 by default, controls change the data."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from plotly_util import chart_specs, decode

APP = str(Path(__file__).resolve().parents[1] / "app.py")


@pytest.fixture
def at():
    a = AppTest.from_file(APP, default_timeout=90)
    a.switch_page("pages/disaggregation.py").run()
    assert not a.exception, a.exception
    return a


def lesson_table(at):
    return next(d.value for d in at.dataframe if "prefill (ms)" in d.value.columns)


def trace(spec: dict, name: str) -> dict:
    return next(t for t in spec["data"] if t.get("name") == name)


def test_default_reproduces_lesson_example_10(at):
    t = lesson_table(at)
    assert t["prompt (tokens)"].tolist() == [1024, 8192, 32768]
    assert t["KV cache (MiB)"].tolist() == [128, 1024, 4096]
    assert t["prefill (ms)"].tolist() == [33.3, 266.1, 1064.2]
    assert t["NVLink, H100"].tolist() == ["0.30 ms (0.9%)", "2.39 ms (0.9%)", "9.54 ms (0.9%)"]
    assert t["InfiniBand NDR 400 Gb/s"].tolist()[0] == "2.68 ms (8.1%)"
    assert t["Ethernet 100 Gb/s"].tolist() == ["10.74 ms (32.3%)", "85.90 ms (32.3%)", "343.60 ms (32.3%)"]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["NVLink, H100"] == "0.9%" and metrics["Ethernet 100 Gb/s"] == "32.3%"
    assert metrics["Break-even link speed"] == "4.04 GB/s"
    specs = chart_specs(at)
    assert {"dis_growth", "dis_ratio", "dis_breakeven", "dis_ttft"} <= set(specs)
    frame = next(f for f in specs["dis_ttft"]["frames"] if f["name"] == "1024")
    assert decode(frame["data"][1]["x"]).round(2).tolist() == [0.30, 2.68, 10.74, 42.95]
    assert not at.error


def test_attention_adds_a_crossover(at):
    pre = decode(trace(chart_specs(at)["dis_growth"], "prefill compute")["y"])
    assert not any(t["name"].startswith("crossover") for t in chart_specs(at)["dis_growth"]["data"])
    at.toggle(key="keep_dis_attention").set_value(True).run()
    assert not at.exception
    spec = chart_specs(at)["dis_growth"]
    assert (decode(trace(spec, "prefill compute")["y"]) > pre).all()
    marks = [t for t in spec["data"] if t["name"].startswith("crossover")]
    assert len(marks) == 1 and "25" in marks[0]["name"]  # 25 GbE: slower than prefill below ~18k tokens
    cross = next(d.value for d in at.dataframe if "transfer slower than prefill" in d.value.columns)
    assert cross["transfer slower than prefill"].iloc[-1].startswith("below 17,")


def test_links_and_model_change_the_figures(at):
    at.checkbox(key="keep_dis_link_ethernet_25g").set_value(False).run()
    names = [t["name"] for t in chart_specs(at)["dis_ratio"]["data"]]
    assert not any("25 Gb/s" in n for n in names)
    kv8 = decode(chart_specs(at)["dis_growth"]["data"][0]["y"])
    at.selectbox(key="keep_dis_model").set_value("70B-fp16").run()
    assert not at.exception
    kv70 = decode(chart_specs(at)["dis_growth"]["data"][0]["y"])
    assert np.allclose(kv70 / kv8, 320 / 128)  # 320 KiB vs 128 KiB per token
    assert lesson_table(at)["KV cache (MiB)"].tolist()[0] == 320


def test_overhead_and_custom_link(at):
    at.checkbox(key="keep_dis_custom_on").set_value(True).run()
    at.number_input(key="keep_dis_overhead").set_value(5.0).run()
    assert not at.exception
    t = lesson_table(at)
    assert t["NVLink, H100"].tolist()[0] == "5.30 ms (15.9%)"
    assert any(c.startswith("Custom 40 Gb/s") for c in t.columns)
    ttft = chart_specs(at)["dis_ttft"]
    assert [d["name"] for d in ttft["data"]][-1] == "fixed overhead"
