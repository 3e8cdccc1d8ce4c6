"""The llama-server log page under Streamlit's AppTest: samples, uploads (real, compressed, cut,
binary, hostile), the inspector and the re-simulation knobs."""
from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app_util import open_page as _open_page
from plotly_util import chart_specs
from servers.llama_server import read_llama_log, summary

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "tests" / "fixtures" / "llama-logs"
OLD_S6 = LOGS / "c392e5094" / "s6_stream_cancel_seed603.log"
DEFAULT_SAMPLE = ROOT / "samples" / "llama-logs" / "s1_two_slots_chunked_prompt.34af94cd9.log.gz"


def open_page(**params) -> AppTest:
    return _open_page("llama_log.py", 60, **params)


@pytest.fixture(scope="module")
def default_page() -> AppTest:
    return open_page()


def metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def table_with(at, column: str):
    return next(d.value for d in at.dataframe if column in d.value.columns)


def upload(at, name: str, data: bytes, mime: str = "text/plain") -> AppTest:
    at.sidebar.file_uploader[0].upload(name, data, mime).run()  # the first uploader is the log's
    return at


def assert_matches_reader(at, trace) -> None:
    """Batch count, task table and charts equal what servers.llama_server reads from the same bytes."""
    sm = summary(trace)
    assert metric(at, "Model calls") == f"{sm['batches']:,}"
    assert metric(at, "Tasks") == str(len(sm["tasks"]))
    assert f"**{sm['batches']:,} model calls**" in " ".join(md.value for md in at.markdown)
    specs = chart_specs(at)
    assert specs["ll_batches"]["layout"]["meta"]["calls"] == sm["batches"]
    assert specs["ll_batches"]["layout"]["meta"]["entries"] == len(trace.batch)
    tasks = table_with(at, "processed (rebuilt)")
    assert tasks["task"].tolist() == [str(t["task"]) for t in sm["tasks"]]
    assert tasks["slot"].tolist() == [t["slot"] for t in sm["tasks"]]
    assert tasks["processed (rebuilt)"].tolist() == [t["prompt_tokens"] for t in sm["tasks"]]
    assert tasks["generated (rebuilt)"].tolist() == [t["generated_tokens"] for t in sm["tasks"]]
    assert tasks["finish"].tolist() == [t["finish"] for t in sm["tasks"]]


def test_default_sample_parses_and_shows_the_batches(default_page):
    at = default_page
    assert not at.error and not at.warning
    assert at.title[0].value == "llama-server log"
    assert_matches_reader(at, read_llama_log(DEFAULT_SAMPLE))
    assert metric(at, "Slots (-np)") == "2" and metric(at, "Batch (-b)") == "256"
    assert metric(at, "Unparsed lines") == "0"
    assert {"ll_batches", "ll_lanes", "ll_call_window"} <= set(chart_specs(at))
    # the re-simulation is one click away (not run for a page that only shows the log)
    assert not {"ll_cmp_batches", "ll_cmp_lanes"} & set(chart_specs(at))
    assert not any(d for d in at.dataframe if "Simulated llama-server" in d.value.columns)
    at.toggle(key="keep_ll_resim").set_value(True).run()
    assert at.query_params["ll_resim"] == "true"
    assert "ll_cmp_batches" in chart_specs(at)
    assert "ll_cmp_lanes" not in chart_specs(at)  # its tab is closed: not built, not sent
    at.session_state["ll_cmp_tab"] = "Slot lanes"
    at.run()
    assert "ll_cmp_lanes" in chart_specs(at) and "ll_cmp_batches" not in chart_specs(at)
    # the inspector opens on the biggest call: a 255-token chunk beside slot 0's decode token
    assert at.slider(key="keep_ll_step").value == 882
    entries = table_with(at, "positions")
    assert entries[["task", "kind", "tokens"]].values.tolist() == [["0", "decode tokens", 1],
                                                                  ["882", "prompt chunk", 255]]
    # knobs as the server ran
    assert at.number_input(key="keep_ll_slots").value == 2 and at.number_input(key="keep_ll_nbatch").value == 256
    assert at.query_params["ll_sample"] == "s1_new"
    # -ub is the log's, said to move no token between calls
    assert any(c.value.startswith("Micro-batch (-ub) 256, as logged, kept") for c in at.caption)


def test_upload_a_real_log(default_page):
    at = upload(default_page, OLD_S6.name, OLD_S6.read_bytes())
    assert not at.exception and not at.error
    trace = read_llama_log(OLD_S6)
    assert_matches_reader(at, trace)
    assert "4748 (c392e5094)" in " ".join(md.value.replace("\\", "") for md in at.markdown)
    tasks = table_with(at, "check")
    no_timings = int(trace.requests["server_predicted_n"].isna().sum())
    assert no_timings == 2 and (tasks["check"] == "–").sum() == no_timings  # cancelled: the server printed none
    assert set(tasks["check"]) <= {"✓", "–"}
    assert at.selectbox(key="keep_ll_sample").disabled
    assert at.number_input(key="keep_ll_slots").value == 4  # the knobs follow the new log


def test_upload_a_compressed_log():
    at = open_page()
    data = (LOGS / "34af94cd9" / "s5_prompt_cache_reuse.log").read_bytes()
    upload(at, "cache.log.gz", gzip.compress(data), "application/gzip")
    assert not at.exception
    assert_matches_reader(at, read_llama_log(data))


@pytest.fixture(scope="module")
def bad_page() -> AppTest:
    """One page for the bad-input tests: each uploads its file over the previous one."""
    return open_page()


def test_random_binary_warns_and_does_not_crash(bad_page):
    at = upload(bad_page, "noise.log", os.urandom(64 * 1024))
    assert not at.exception
    assert metric(at, "Model calls") == "0"
    assert any("No model calls" in e.value for e in at.error)
    assert any("scheduler lines" in w.value for w in at.warning)
    assert int(metric(at, "Unparsed lines").replace(",", "")) > 0
    assert "ll_batches" not in chart_specs(at)


def test_a_cut_log_keeps_what_it_has(bad_page):
    data = OLD_S6.read_bytes()
    cut = data[: len(data) // 2]
    at = upload(bad_page, "cut.log", cut)
    assert not at.exception and not at.error
    assert any("cut" in w.value for w in at.warning)
    assert_matches_reader(at, read_llama_log(cut))


def test_html_and_script_stay_text(bad_page):
    """HTML/JS in token text and in the file name: never rendered as HTML."""
    data = OLD_S6.read_bytes()
    evil = b"<script>alert(1)</script><img src=x onerror=alert(2)>"
    hostile = data.replace(b"next token:", b"next token: " + evil, 50) + b"\n" + evil + b"\n"
    at = upload(bad_page, "<img src=x onerror=alert(3)>[x](javascript:alert(4)).log", hostile)
    assert not at.exception
    assert metric(at, "Model calls") == f"{len(read_llama_log(data).steps):,}"
    for md in at.markdown:
        assert not md.proto.allow_html
        assert "<img" not in md.value.replace("\\<", "") and "](javascript" not in md.value
    for group in (at.warning, at.error, at.caption):
        for el in group:
            assert not getattr(el.proto, "allow_html", False)


def test_re_simulate_changes_with_a_knob():
    at = open_page(ll_sample="s3_nocb", ll_clock="calls", ll_resim="true")
    assert metric(at, "Cont. batching") == "off"
    before = table_with(at, "Simulated llama-server").set_index("metric")
    assert before.loc["mean TTFT (calls)", "Simulated llama-server − Real log"] == pytest.approx(0)
    at.toggle(key="keep_ll_cb").set_value(True).run()  # -cb: prompts no longer wait for decodes to end
    assert not at.exception
    after = table_with(at, "Simulated llama-server").set_index("metric")
    assert after.loc["mean TTFT (calls)", "Simulated llama-server"] < before.loc["mean TTFT (calls)",
                                                                                "Simulated llama-server"]
    at.session_state["ll_cmp_tab"] = "Slot lanes"
    at.number_input(key="keep_ll_slots").set_value(1).run()
    assert chart_specs(at)["ll_cmp_lanes"]["layout"]["meta"]["slots"][1] == 1
    assert at.query_params["ll_slots"] == "1" and at.query_params["ll_cb"] == "true"
    # vLLM: too few KV blocks for the longest task is said plainly, the rest stays
    at.number_input(key="keep_ll_v_blocks").set_value(8).run()
    assert not at.exception
    assert any("Simulated vLLM cannot run" in e.value for e in at.error)
    assert "ll_cmp_lanes" in chart_specs(at)


def test_re_simulate_on_wall_time_with_a_fitted_cost():
    """s1 (timestamps): the simulated llama-server, with a cost fitted to the log's calls, lands within
    10% of the log's own mean TTFT and end-to-end time; the model-call clock gives the call rows back."""
    at = open_page(ll_sample="s1_new", ll_resim="true")
    assert at.radio(key="keep_ll_clock").value == "time"
    table = table_with(at, "Simulated llama-server").set_index("metric")
    log, sim = table["Real log"], table["Simulated llama-server"]
    assert "mean TTFT (calls)" not in table.index
    assert sim["mean TTFT (ms)"] == pytest.approx(log["mean TTFT (ms)"], rel=0.1)
    assert sim["mean end-to-end (ms)"] == pytest.approx(log["mean end-to-end (ms)"], rel=0.1)
    assert sim["model calls"] == log["model calls"] == 1500
    fit = next(m.value for m in at.markdown if m.value.startswith("Cost of a call"))
    assert "ms per token" in fit and "R²" in fit
    assert metric(at, "Simulated llama-server: mean TTFT").endswith("ms")
    at.radio(key="keep_ll_clock").set_value("calls").run()
    table = table_with(at, "Simulated llama-server").set_index("metric")
    assert "mean TTFT (calls)" in table.index and "mean TTFT (ms)" not in table.index
    assert not [m for m in at.markdown if m.value.startswith("Cost of a call")]


def test_a_log_without_timestamps_re_simulates_in_calls():
    at = open_page(ll_sample="s6_cancel", ll_clock="time", ll_resim="true")
    assert "mean TTFT (calls)" in table_with(at, "Simulated llama-server")["metric"].tolist()
    assert any("has no timestamps" in c.value for c in at.caption)


def test_link_settings_win_and_scrub(default_page):
    at = open_page(ll_sample="s6_cancel", ll_slots="3", ll_step="113", ll_clock="calls", ll_resim="true")
    assert at.selectbox(key="keep_ll_sample").value == "s6_cancel"
    assert at.number_input(key="keep_ll_slots").value == 3  # given by the link, not reset by the log
    assert at.slider(key="keep_ll_step").value == 113
    assert chart_specs(at)["ll_lanes"]["layout"]["meta"]["wall"] is False
    events = table_with(at, "event")
    assert ["113", "cancel"] in events[["task", "event"]].values.tolist()
    at.button(key="ll_next").click().run()
    assert at.slider(key="keep_ll_step").value == 114
    assert chart_specs(at)["ll_call_window"]["layout"]["shapes"][0]["x0"] == 113.5


def test_a_log_of_two_server_runs_lists_each_runs_settings():
    a = ROOT / "tests" / "fixtures" / "llama-logs" / "c392e5094" / "s5_prompt_cache_reuse.log"
    b = ROOT / "tests" / "fixtures" / "llama-logs" / "34af94cd9" / "s9_kv_unified_small_ubatch.log"
    at = upload(open_page(), "two_runs.log", a.read_bytes() + b.read_bytes())
    assert not at.exception, at.exception
    assert metric(at, "Batch (-b)") == "–"   # no one value for the whole log
    assert any("differ in" in w.value and "table of server runs" in w.value for w in at.warning)
    runs = next(d.value for d in at.dataframe if "first call" in d.value.columns)
    one, two = read_llama_log(a).meta, read_llama_log(b).meta
    assert runs["run"].tolist() == [1, 2]
    assert runs["n_batch"].tolist() == [one["n_batch"], two["n_batch"]]
    assert runs["build"].tolist() == [one["build"], two["build"]]
    assert any(m.value.startswith("**2 server runs in this log**") for m in at.markdown)
    at.toggle(key="keep_ll_resim").set_value(True).run()
    assert not at.exception, at.exception
    assert any("holds 2 server runs" in i.value for i in at.info)


def test_time_per_call_tab_draws_the_calls_durations():
    at = open_page()
    assert "ll_batches" in chart_specs(at) and "ll_call_times" not in chart_specs(at)   # only the open tab
    at.session_state["ll_batch_tab"] = "Time per call"
    at.run()
    assert not at.exception, at.exception
    specs = chart_specs(at)
    assert "ll_call_times" in specs and "ll_batches" not in specs
    m = specs["ll_call_times"]["layout"]["meta"]
    assert m["calls"] == 1500 and m["worst_has_prompt"]
    assert any(f"The slowest, call {m['worst_call']:,}" in c.value for c in at.caption)


def test_a_log_without_timestamps_has_no_time_tab():
    untimed = LOGS / "34af94cd9" / "s6_stream_cancel_seed601.log"   # run with --log-prefix off
    at = upload(open_page(), untimed.name, untimed.read_bytes())
    assert not at.exception, at.exception
    assert not at.tabs or all("Time per call" not in t.label for t in at.tabs)
    assert "ll_batches" in chart_specs(at)


def test_a_docker_log_that_begins_mid_run():
    """`docker logs -t --since` of a real log (tests/collected.py): the page names the prefix and the
    clock it gives, and marks the tasks that began before the excerpt partial in its task table."""
    from collected import docker_excerpt
    data = docker_excerpt()
    trace = read_llama_log(data)
    assert trace.requests["partial"].any() and not trace.requests["partial"].all()
    at = upload(open_page(), "docker.log", data)
    assert not at.exception, at.exception
    captions = " ".join(c.value for c in at.caption)
    assert "docker" in captions and "prefix" in captions.lower()
    tasks = table_with(at, "in the log")
    assert tasks["in the log"].tolist() == ["partial" if p else "whole" for p in trace.requests["partial"]]
    assert any("began before the log" in i.value for i in at.info)


def test_a_log_in_the_servers_data_folder_opens_from_the_servers_side(monkeypatch, tmp_path):
    """SCHEDLAB_DATA_DIR: a log in the folder opens by its listed name (read from its path, no
    upload cap), the same as the reader reads it; a name the listing lacks opens the sample."""
    src = ROOT / "samples" / "llama-logs" / "s3_no_cont_batching.34af94cd9.log.gz"
    (tmp_path / "server.log.gz").write_bytes(src.read_bytes())
    monkeypatch.setenv("SCHEDLAB_DATA_DIR", str(tmp_path))
    at = open_page(ll_file="server.log.gz")
    assert not at.exception and not at.error
    assert_matches_reader(at, read_llama_log(src))
    assert any("Showing a file of the server's data folder" in c.value for c in at.sidebar.caption)
    other = open_page(ll_file="/etc/hostname")
    assert not other.exception
    assert any("not in the data folder's listing" in c.value for c in other.sidebar.caption)
