"""The vLLM server page following a file of the server's data folder (SCHEDLAB_DATA_DIR) under
AppTest: a thread writes a real recording's lines in pieces (cut lines too) while the page
re-reads it; the step count grows to the whole file's, every request finishes, the simulator's
verdict holds on the run so far; the folder is listed; a link naming a file outside it is not
opened; a header that changes half-way is one sentence."""
from __future__ import annotations

import gzip
import re
import threading
import time
from pathlib import Path

import pytest

from app_util import open_page
from servers.vllm.recording import read_recording, to_trace
from sim.metrics import summary

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "vllm" / "fcfs_kv_pressure.jsonl.gz"


def metric(at, label: str) -> int | None:
    v = next((m.value for m in at.metric if m.label == label), None)
    return None if v is None else int(v.replace(",", ""))


@pytest.fixture()
def folder(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    monkeypatch.setenv("SCHEDLAB_DATA_DIR", str(d))
    return d


def write_slowly(path: Path, text: bytes, pieces: int, pause_s: float) -> threading.Thread:
    """Append `text` in `pieces` cuts (most of them mid-line), flushing each."""
    def run():
        with open(path, "ab") as f:
            step = len(text) // pieces + 1
            for k in range(0, len(text), step):
                f.write(text[k:k + step])
                f.flush()
                time.sleep(pause_s)
    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th


def test_a_followed_file_grows_on_the_page_until_every_request_finished(folder):
    text = gzip.decompress(SAMPLE.read_bytes())
    whole = summary(to_trace(read_recording(SAMPLE)))
    first = text.index(b"\n") + 1
    (folder / "steps.jsonl").write_bytes(text[:first])   # the header only: the server just started
    at = open_page("vllm_server.py", vs_file="steps.jsonl", vs_follow="true")
    assert any("Following" in c.value and "0 steps" in c.value for c in at.caption)
    end_line = b'{"kind":"end","t":99999.0,"steps":%d}\n' % whole["steps"]   # the sample's server was killed
    th = write_slowly(folder / "steps.jsonl", text[first:] + end_line, pieces=12, pause_s=0.25)
    seen = []
    end = time.monotonic() + 60
    while time.monotonic() < end:
        at.run()
        assert not at.exception, at.exception
        seen.append(metric(at, "Steps"))
        if not th.is_alive() and seen[-1] == whole["steps"]:
            break
        time.sleep(0.2)
    th.join()
    assert seen[-1] == whole["steps"] and len(set(seen)) >= 3 and seen == sorted(seen)   # it grew, step by step
    assert metric(at, "Finished") == metric(at, "Requests") == whole["requests"]
    assert any("the recorder closed the file" in c.value for c in at.caption)
    n = whole["steps"]
    assert any(f"**{n - 299:,} to {n:,}** (pinned to the latest)" in c.value for c in at.caption)   # the last 300
    at.toggle(key="vs_live_pin").set_value(False).run()   # unpinned: the window stays where it was
    assert any(f"**{n - 299:,} to {n:,}**." in c.value for c in at.caption)
    assert not at.warning and not at.error
    at.toggle(key="keep_vs_sim").set_value(True).run()
    assert not at.exception, at.exception
    assert any(f"The same decisions at all the {whole['steps']:,} steps" in s.value for s in at.success)
    assert "TTFT: mean error" in [m.label for m in at.metric]
    # the prediction on the whole file, its model fitted on it (the first fit: every step read)
    assert any(f"Predicted times at step {n:,}, with the cost model fitted on the first {n:,} steps" in c.value
               for c in at.caption), [c.value for c in at.caption]


def test_the_verdict_on_a_run_still_going_holds_for_the_steps_so_far(folder):
    text = gzip.decompress(SAMPLE.read_bytes())
    cut = text[: len(text) // 2]
    (folder / "half.jsonl").write_bytes(cut[: cut.rindex(b"\n") + 1] + cut[cut.rindex(b"\n") + 1:][:9])
    at = open_page("vllm_server.py", vs_file="half.jsonl", vs_follow="true", vs_sim="true")
    n = metric(at, "Steps")
    assert 10 < n < summary(to_trace(read_recording(SAMPLE)))["steps"]
    assert any(f"all the {n:,} steps read" in s.value and "the run goes on" in s.value for s in at.success)


def test_the_folder_is_listed_and_a_link_outside_it_opens_the_sample(folder, tmp_path):
    (folder / "a.jsonl.gz").write_bytes(SAMPLE.read_bytes())
    (tmp_path / "secret.jsonl").write_bytes(gzip.decompress(SAMPLE.read_bytes()))
    at = open_page("vllm_server.py")
    box = at.selectbox(key="keep_vs_file")
    assert box.options == ["(none)", "a.jsonl.gz"]
    at.selectbox(key="keep_vs_file").set_value("a.jsonl.gz").run()   # opened whole, not followed
    assert not at.exception, at.exception
    assert f"{SAMPLE.stat().st_size / 1e3:,.1f} kB when the page was opened." in [c.value for c in at.sidebar.caption]
    assert metric(at, "Steps") == summary(to_trace(read_recording(SAMPLE)))["steps"]
    for name in ("../secret.jsonl", str(tmp_path / "secret.jsonl")):
        at = open_page("vllm_server.py", vs_file=name)
        assert at.selectbox(key="keep_vs_file").value == ""
        assert any("not in the data folder's listing" in c.value for c in at.sidebar.caption)
        assert any(m.label == "Steps" for m in at.metric)   # the bundled sample, as without a link


def test_a_header_that_changes_half_way_is_one_sentence_and_the_page_stays(folder):
    text = gzip.decompress(SAMPLE.read_bytes())
    head = text[: text.index(b"\n") + 1]
    p = folder / "twice.jsonl"
    p.write_bytes(text[: len(text) // 3])
    at = open_page("vllm_server.py", vs_file="twice.jsonl", vs_follow="true")
    before = metric(at, "Steps")
    with open(p, "ab") as f:   # a second server run into the same file
        f.write(text[len(text) // 3:][text[len(text) // 3:].index(b"\n") + 1:][:2000].rsplit(b"\n", 1)[0] + b"\n")
        f.write(head.replace(b'"started_unix":', b'"started_unix":1') + text[len(head):len(head) + 3000])
    at.run()
    assert not at.exception, at.exception
    said = [re.sub(r"\\(.)", r"\1", w.value) for w in at.warning]   # as rendered (plain() escapes markdown)
    assert len(said) == 1 and "header changed half-way" in said[0] and len(said[0]) <= 200
    assert metric(at, "Steps") >= before


def test_without_a_data_folder_the_page_says_how_to_get_one(monkeypatch):
    monkeypatch.delenv("SCHEDLAB_DATA_DIR", raising=False)
    at = open_page("vllm_server.py")
    assert not [s for s in at.selectbox if s.key == "keep_vs_file"]
    assert any("SCHEDLAB_DATA_DIR" in c.value for c in at.sidebar.caption)


@pytest.mark.parametrize("follow", ["true", "false"])
def test_a_10_gb_gzip_bomb_in_the_folder_is_one_sentence(folder, follow):
    one = gzip.compress(b"\0" * (100 << 20), 9)   # 100 MB of zeros in 100 KB; 100 members: 10 GB
    (folder / "bomb.jsonl.gz").write_bytes(one * 100)
    at = open_page("vllm_server.py", vs_file="bomb.jsonl.gz", vs_follow=follow)
    for _ in range(30):   # followed, 8 MB of text a read: a few refreshes to reach the 64 MiB line cap
        if at.warning or at.error:
            break
        at.run()
    assert not at.exception, at.exception
    said = [re.sub(r"\\(.)", r"\1", x.value) for x in (*at.warning, *at.error)]
    assert len(said) == 1 and len(said[0].split(": ", 1)[-1]) <= 200, said
    assert ("line is over 64 MiB" in said[0]) if follow == "true" else ("cannot be shown" in said[0]), said


def test_a_recording_cut_while_a_request_waits_is_drawn():
    """A killed server's file: a request added, never scheduled, after a preemption (the request
    ids of the events and of the batch then differ; the lanes' preemption marks merge on them)."""
    lines = gzip.decompress(SAMPLE.read_bytes()).splitlines(keepends=True)
    at = open_page("vllm_server.py")
    at.sidebar.file_uploader[0].upload("cut.jsonl", b"".join(lines[:141]), "application/x-ndjson").run()
    assert not at.exception, at.exception
    assert metric(at, "Steps") > 50 and metric(at, "Preemptions") > 0
