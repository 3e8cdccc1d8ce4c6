"""Hostile uploads on the pages, under Streamlit's AppTest: a plain one-line message, no
exception, no traceback, no server path. And the guard around every page (ui/guard.py) on a
page that fails in a way no page expected."""
from __future__ import annotations

import gzip
import json
import logging
import math
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest


ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
LEAKS = ("Traceback", ".py", "/work/", str(ROOT), 'File "')
# what no text on a page may hold (a page's own captions may name a module, as the vLLM page's does)
PAGE_LEAKS = ("Traceback", "/work/", str(ROOT), 'File "')


def shown_text(at: AppTest) -> str:
    """Everything the page wrote that a user reads: alerts, markdown, captions, text."""
    parts = [e.value for kind in ("error", "warning", "info", "success", "markdown", "caption", "text")
             for e in getattr(at, kind)]
    return "\n".join(str(p) for p in parts)


def assert_plain(at: AppTest, *words: str) -> None:
    assert not at.exception, at.exception
    assert at.error, "expected a message"
    msg = at.error[0].value
    assert all(w in msg for w in words), msg
    assert "\n" not in msg.strip() and len(msg) <= 200, msg   # one short line
    alerts = "\n".join(e.value for kind in ("error", "warning") for e in getattr(at, kind))
    assert not any(leak in alerts for leak in LEAKS), alerts
    assert not any(leak in shown_text(at) for leak in PAGE_LEAKS)


def upload_on_playback(name: str, data: bytes) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.radio(key="keep_pb_source").set_value("Upload a workload JSON").run()
    at.file_uploader(key="pb_upload").upload(name, data, "application/json")
    at.run()
    return at


@pytest.mark.parametrize("name,data,words", [
    ("nested.json", b"[" * 100_000 + b"]" * 100_000, ("nested.json", "100,000 levels deep", "at most 64")),
    ("nan.json", json.dumps({"requests": [{"id": "r7", "prompt_len": 4, "max_tokens": 2,
                                           "arrival_time": math.nan}]}).encode(),
     ("arrival_time of request r7 is NaN", "finite numbers")),
    ("far.json", json.dumps({"requests": [{"id": "r7", "prompt_len": 4, "max_tokens": 2,
                                           "arrival_time": 1e18}]}).encode(), ("1e+18", "to 1e+12")),
    ("long.json", json.dumps({"requests": [{"id": "r7", "prompt_len": 1e300, "max_tokens": 2}]}).encode(),
     ("prompt_len of request r7 is 1e+300", "10,000,000")),
    ("digits.json", b'{"requests": [{"id": "r7", "prompt_len": ' + b"7" * 5000 + b', "max_tokens": 2}]}',
     ("thousands of digits",)),
])
def test_a_hostile_workload_on_playback_is_one_plain_line(name, data, words):
    at = upload_on_playback(name, data)
    assert_plain(at, *words)
    assert len(at.error[0].value) <= 200


@pytest.mark.parametrize("name,data", [
    ("photo.png", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 64),
    ("junk.bin", bytes(range(256)) * 64),
    ("n" * 300 + ".csv", b"when,in,out\n1,2,3\n"),
], ids=["png", "binary", "a long name"])
def test_a_file_of_no_known_format_is_one_short_line_with_the_formats_under_it(name, data):
    from sim.limits import FORMATS
    at = upload_on_playback(name, data)
    assert_plain(at, "expected a workload JSON or an Azure, BurstGPT or Mooncake trace")
    formats = [c.value for c in at.caption if "Accepted formats" in c.value]
    assert len(formats) == 1, [c.value for c in at.caption]
    for label, what in FORMATS:   # under the message: what each format looks like
        assert label in formats[0] and what in formats[0]
    assert not at.get("plotly_chart")


def test_a_bad_workload_shows_no_formats_list():
    at = upload_on_playback("nan.json", json.dumps({"requests": [{"id": "r7", "prompt_len": 4, "max_tokens": 2,
                                                                   "arrival_time": math.nan}]}).encode())
    assert_plain(at, "arrival_time of request r7 is NaN")
    assert not [c.value for c in at.caption if "Accepted formats" in c.value]   # it is JSON: no list


def test_a_damaged_recording_header_on_the_vllm_page_is_one_plain_line():
    lines = [json.loads(x) for x in gzip.decompress((ROOT / "samples/vllm/priority.jsonl.gz").read_bytes()).splitlines()]
    lines[0]["config"]["block_size"] = 0
    at = AppTest.from_file(APP, default_timeout=90)
    at.switch_page("pages/vllm_server.py").run()
    at.sidebar.file_uploader[0].upload("bad.jsonl", "\n".join(map(json.dumps, lines)).encode(),
                                       "application/x-ndjson").run()
    assert_plain(at, "header is damaged", "must be a whole number from 1 to 1,024, not 0")


def test_a_binary_file_on_the_llama_log_page_is_not_a_crash():
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("pages/llama_log.py").run()
    at.sidebar.file_uploader[0].upload("junk.log", bytes(range(256)) * 2048, "text/plain").run()
    assert not at.exception, at.exception
    assert not any(leak in shown_text(at) for leak in PAGE_LEAKS)


def test_a_settings_file_bomb_is_one_plain_line():
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.file_uploader(key="ui_pb_settings_file").upload("s.json", b"[" * 20_000 + b"]" * 20_000, "application/json")
    at.run()
    assert_plain(at, "levels deep")


# --------------------------------------------------------------------------------------------
# The guard: an error no page expected, on a script that runs the real guard
# --------------------------------------------------------------------------------------------

def _failing_page():
    import streamlit as st

    from ui.guard import guarded

    def page():
        st.write("before the failure")
        open("/work/no/such/dir/secret.txt")   # an OSError whose text holds a server path

    guarded(page)
    st.write("after the guard")


def _stopping_page():
    import streamlit as st

    from ui.guard import guarded

    def page():
        st.write("before the stop")
        st.stop()

    guarded(page)
    st.write("never shown: st.stop ends the run")


def test_the_guard_turns_an_unexpected_error_into_one_plain_line_and_logs_it(caplog):
    at = AppTest.from_function(_failing_page, default_timeout=30)
    with caplog.at_level(logging.ERROR, logger="scheduler_lab"):
        at.run()
    assert not at.exception, at.exception
    assert len(at.error) == 1
    msg = at.error[0].value
    assert "internal error (FileNotFoundError)" in msg and "server's log" in msg
    assert not any(leak in shown_text(at) for leak in LEAKS), shown_text(at)
    assert "secret.txt" not in shown_text(at)
    assert [m.value for m in at.markdown] == ["before the failure", "after the guard"]
    # the details went to the server's log, traceback and path included
    rec = next(r for r in caplog.records if r.name == "scheduler_lab")
    assert rec.exc_info and "secret.txt" in str(rec.exc_info[1])


def test_the_guard_lets_st_stop_through():
    at = AppTest.from_function(_stopping_page, default_timeout=30)
    at.run()
    assert not at.exception and not at.error
    assert [m.value for m in at.markdown] == ["before the stop"]


def test_the_app_hides_error_details_from_the_browser():
    import tomllib
    cfg = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    # "none": no traceback, type or message (streamlit 1.67; a plain false still shows the traceback)
    assert cfg["client"]["showErrorDetails"] == "none"



# --------------------------------------------------------------------------------------------
# Inputs a mutation sweep (tests/fuzz_inputs.py) crashed or hung the pages with
# --------------------------------------------------------------------------------------------

def _sample_lines(path: str) -> list[bytes]:
    return gzip.decompress((ROOT / path).read_bytes()).split(b"\n")


def _on_vllm_page(name: str, data: bytes) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("pages/vllm_server.py").run()
    at.sidebar.file_uploader[0].upload(name, data, "application/x-ndjson").run()
    return at


def test_a_recording_line_whose_kind_is_a_list_is_skipped_on_the_vllm_page():
    lines = _sample_lines("samples/vllm/priority.jsonl.gz")   # was a TypeError: the guard's "internal error"
    doc = json.loads(lines[2])
    lines[2] = json.dumps({**doc, "kind": [doc["kind"]]}).encode()
    at = _on_vllm_page("listkind.jsonl", b"\n".join(lines))
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert not any(leak in shown_text(at) for leak in PAGE_LEAKS)


def test_a_recording_step_line_written_twice_is_a_warning_on_the_vllm_page():
    lines = _sample_lines("samples/vllm/priority.jsonl.gz")   # was pandas' "duplicate labels": the guard's line
    k = next(i for i, x in enumerate(lines) if x.startswith(b'{"kind":"step"') and i > 20)
    at = _on_vllm_page("dup.jsonl", b"\n".join(lines[:k + 1] + [lines[k]] + lines[k + 1:]))
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert "a step line repeats" in shown_text(at)


def test_a_recording_the_simulator_cannot_finish_shows_where_it_parts(monkeypatch):
    # simulate's RuntimeError (its step cap here; "no progress for 1000 steps" on a recording with
    # a request added twice) stopped the verdict and the prediction on the guard's "internal error"
    import servers.vllm.compare as compare
    real = compare.simulate
    monkeypatch.setattr(compare, "simulate", lambda wl, *a, **kw: real(wl, *a, **{**kw, "max_steps": 40}))
    data = gzip.decompress((ROOT / "samples/vllm/fcfs_kv_pressure.jsonl.gz").read_bytes()) + b"\n\n"   # its own cache key
    at = _on_vllm_page("capped.jsonl", data)
    at.toggle(key="keep_vs_sim").set_value(True).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("The decisions part at step 41" in w.value for w in at.warning)
    assert any("The simulator stopped there: step cap 40" in c.value for c in at.caption)
    assert any("No time prediction: the simulator cannot run" in i.value for i in at.info)


def test_fleet_recordings_with_a_request_added_twice_open_with_a_warning():
    # read_fleet's verdict raised the simulator's RuntimeError on the twice-added request: the
    # guard's "internal error"; the reader now skips the repeated line and says so
    sample = "samples/fleet/vllm-router-cache_aware/"
    lines = _sample_lines(sample + "rec-8101.jsonl.gz")
    k = next(i for i, x in enumerate(lines) if x.startswith(b'{"kind":"add"'))
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params["fleet_source"] = "A real fleet (upload recordings)"
    at.switch_page("pages/fleet.py").run()
    at.file_uploader(key="fleet_recordings").set_value(
        [("a.jsonl", b"\n".join(lines[:k + 1] + [lines[k]] + lines[k + 1:]), "application/x-ndjson"),
         ("b.jsonl.gz", (ROOT / sample / "rec-8102.jsonl.gz").read_bytes(), "application/gzip")])
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert "add line repeats" in shown_text(at)
    assert not any(leak in shown_text(at) for leak in PAGE_LEAKS)


def test_a_llama_log_of_two_gzip_members_reads_on_the_page():
    # the llama-server reader's gunzip looped without end on `cat a.log.gz b.log.gz`
    one = (ROOT / "samples/llama-logs/s3_no_cont_batching.34af94cd9.log.gz").read_bytes()
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("pages/llama_log.py").run()
    at.sidebar.file_uploader[0].upload("two.log.gz", one + one, "application/gzip").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert not any(leak in shown_text(at) for leak in PAGE_LEAKS)
