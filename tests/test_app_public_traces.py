"""Public request traces uploaded on the Playback and Compare pages (AppTest): read by content,
run on a roofline in ms, the trace's options, a progress bar while reading, plain errors."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import ui.workloads
from plotly_util import chart_specs
from sim import public_traces
from sim.cost import cost_from_preset
from sim.inputs import parse_workload
from sim.metrics import summary
from sim.simulate import simulate

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
FIX = ROOT / "tests" / "fixtures" / "public_traces"
UPLOAD = "Upload a workload JSON"


def page(path: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    if path:
        at.switch_page(path).run()
    assert not at.exception, at.exception
    return at


def upload(at: AppTest, prefix: str, file: str, as_name: str) -> AppTest:
    at.radio(key=f"keep_{prefix}_source").set_value(UPLOAD).run()
    at.file_uploader(key=f"{prefix}_upload").upload(as_name, (FIX / file).read_bytes(), "application/octet-stream")
    at.run()
    assert not at.exception, at.exception
    return at


def metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def expected_steps(file: str, limit: int, **config) -> int:
    wl = parse_workload((FIX / file).read_bytes(), limit=limit)
    return summary(simulate(wl, config, cost=cost_from_preset(public_traces.DEFAULT_COST)))["steps"]


def test_playback_runs_a_mooncake_trace_named_json_with_its_prefix_cache():
    at = upload(page(), "pb", "mooncake.jsonl", "trace.json")
    assert not at.error, [e.value for e in at.error]
    text = " ".join(md.value for md in at.markdown)
    assert "Mooncake trace: 60 requests" in text and "milliseconds" in text
    assert at.selectbox(key="keep_pb_cost").value == public_traces.DEFAULT_COST   # ms arrivals, ms steps
    assert at.toggle(key="keep_pb_prefix").value is True
    assert {"occupancy", "step_tokens", "kv_map"} <= set(chart_specs(at))
    assert metric(at, "Steps") == f"{expected_steps('mooncake.jsonl', 500):,}"


def test_playback_trace_options_rerun_without_resetting_the_settings():
    at = upload(page(), "pb", "azure_conv.csv", "azure.csv")
    at.selectbox(key="keep_pb_policy").set_value("spf").run()
    at.number_input(key="keep_pb_trace_limit").set_value(20).run()
    assert not at.exception and not at.error
    assert at.selectbox(key="keep_pb_policy").value == "spf"   # the same file: the settings stay
    assert "20 requests of 80 rows" in " ".join(md.value for md in at.markdown)
    assert metric(at, "Steps") == f"{expected_steps('azure_conv.csv', 20, policy='spf'):,}"
    assert at.query_params["pb_trace_limit"] in ("20", ["20"])


def test_compare_runs_both_sides_on_a_burstgpt_trace():
    at = upload(page("pages/compare.py"), "cmp", "burstgpt.csv", "burst.csv")
    assert not at.error, [e.value for e in at.error]
    assert at.selectbox(key="keep_cmp_a_cost").value == public_traces.DEFAULT_COST
    assert at.selectbox(key="keep_cmp_b_cost").value == public_traces.DEFAULT_COST
    assert "lockstep" in chart_specs(at)
    steps = f"{expected_steps('burstgpt.csv', 500):,}"
    assert metric(at, "Steps") == f"{steps} → {steps}"   # identical settings on both sides
    assert "BurstGPT trace: 77 requests of 80 rows" in " ".join(md.value for md in at.markdown)


def test_reading_shows_progress(monkeypatch):
    calls = []
    real = ui.workloads.parse_workload

    def spy(data, name="", **kw):
        def progress(done, total):
            calls.append(done)
            kw["progress"](done, total)   # the page's st.progress bar
        return real(data, name, **{**kw, "progress": progress})
    monkeypatch.setattr(ui.workloads, "parse_workload", spy)
    monkeypatch.setattr(public_traces, "PIECE_BYTES", 256)
    at = upload(page(), "pb", "burstgpt.csv", "burst.csv")
    assert not at.error and len(calls) > 5 and calls[-1] == (FIX / "burstgpt.csv").stat().st_size


@pytest.mark.parametrize("payload,message", [
    (b"when,in,out\n1,2,3\n", "none of the formats read here"),
    (b"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,lots,3\n", "row 1: ContextTokens"),
])
def test_a_file_that_is_no_trace_says_what_was_expected(payload, message):
    at = page()
    at.radio(key="keep_pb_source").set_value(UPLOAD).run()
    at.file_uploader(key="pb_upload").upload("x.csv", payload, "text/csv").run()
    assert not at.exception
    assert at.error and message in at.error[0].value, [e.value for e in at.error]
    assert "occupancy" not in chart_specs(at)
