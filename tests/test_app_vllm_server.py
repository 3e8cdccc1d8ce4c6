"""The vLLM server page under Streamlit's AppTest: a bundled recording, the simulator's verdict
and prediction, and uploads that are no recording."""
from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app_util import open_page as _open_page
from plotly_util import chart_specs
from servers.vllm.recording import read_recording, to_trace
from sim.metrics import summary

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples" / "vllm"


def open_page(**params) -> AppTest:
    return _open_page("vllm_server.py", 90, **params)


def metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


@pytest.fixture(scope="module")
def page() -> AppTest:
    return open_page()


def test_the_default_sample_shows_what_the_reader_reads(page):
    tr = to_trace(read_recording(SAMPLES / "fcfs_kv_pressure.jsonl.gz"))
    m = summary(tr)
    assert metric(page, "Steps") == f"{m['steps']:,}" and metric(page, "Requests") == str(m["requests"])
    assert metric(page, "Preemptions") == str(m["preemptions"]) and m["preemptions"] > 0
    specs = chart_specs(page)
    assert {"vs_lanes", "vs_tokens", "vs_phases", "vs_kv_map"} <= set(specs)
    assert specs["vs_phases"]["layout"]["meta"]["phases"][:2] == ["schedule", "model"]
    assert not page.warning   # a whole recording: nothing to warn about


def test_the_simulator_toggle_gives_the_verdict_and_a_prediction():
    at = open_page(vs_sample="priority")
    at.toggle(key="keep_vs_sim").set_value(True).run()
    assert not at.exception, at.exception
    assert any("The same decisions at all" in s.value for s in at.success)
    at.selectbox(key="keep_vs_cal").set_value("fcfs").run()
    assert not at.exception, at.exception
    labels = [m.label for m in at.metric]
    assert "TTFT: mean error" in labels and "End-to-end: mean error" in labels
    assert "vs_prediction" in chart_specs(at)


@pytest.mark.parametrize("name,data,words", [
    ("x.jsonl", bytes(range(256)) * 8, "binary"),
    ("w.json", b'{"config": {}, "requests": []}', "workload"),
    ("cut.jsonl.gz", gzip.compress(b"hello\n"), "not a vLLM step recording"),
])
def test_an_upload_that_is_no_recording_says_why(page, name, data, words):
    at = open_page()
    at.sidebar.file_uploader[0].upload(name, data, "application/octet-stream").run()
    assert not at.exception, at.exception
    assert any(words in e.value for e in at.error)


def test_a_cut_upload_shows_what_it_holds_and_warns():
    data = gzip.decompress((SAMPLES / "fcfs_kv_pressure.jsonl.gz").read_bytes())
    at = open_page()
    at.sidebar.file_uploader[0].upload("cut.jsonl", data[: len(data) // 2 + 17], "application/x-ndjson").run()
    assert not at.exception, at.exception
    assert any("last line is cut" in w.value for w in at.warning)
    assert int(metric(at, "Steps").replace(",", "")) > 10
